"""The cell's text: its statements (each with its offset in the cell), the values its `{name}`
and `:name` markers take from the user's namespace, and a mistake's position in a statement as
recsql ran it (after `{name}` was filled in) mapped back to the cell as the person wrote it."""

from __future__ import annotations

import difflib
import string
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from recsql.errors import RecSQLError, caret_block
from recsql.parser import parse_statement, split_statements


@dataclass(frozen=True)
class Piece:
    """One statement of the cell: its text as written and where it starts in the cell."""

    text: str
    offset: int


def pieces(cell: str) -> list[Piece]:
    """The cell's `;`-separated statements, each as written, with its offset (the split keeps
    each statement's text, so each is found in order)."""
    found, cursor = [], 0
    for text in split_statements(cell):
        offset = cell.index(text, cursor)
        found.append(Piece(text, offset))
        cursor = offset + len(text)
    return found


def check_syntax(piece: Piece) -> None:
    """Parse the statement as written (a `{name}` parses as a marker): a syntax error is raised
    before anything in the cell runs."""
    parse_statement(piece.text)


@dataclass
class Bindings:
    """What `recsql.run` receives for one statement: `:name` values (`args`) and `{name}` values
    (keyword arguments; a DataFrame becomes a relation)."""

    args: dict[str, Any]
    kwargs: dict[str, Any]


def bindings(piece: Piece, namespace: dict[str, Any]) -> Bindings:
    """The statement's markers bound from the notebook's variables; a marker naming no variable
    is the user's mistake, pointed at in the statement."""
    kwargs = {}
    for name, at in _braced(piece.text):
        kwargs[name] = _lookup(namespace, name, "{" + name + "}", piece.text, at)
    args = {}
    for name, at in _colon(piece.text):
        args[name] = _lookup(namespace, name, ":" + name, piece.text, at)
    return Bindings(args, kwargs)


def _lookup(namespace: dict[str, Any], name: str, marker: str, text: str, at: int) -> Any:
    if name in namespace:
        return namespace[name]
    line = text.count("\n", 0, at) + 1
    raise RecSQLError(
        f"{marker} names no variable of the notebook: define {name} = ... in a cell above and "
        "run it first", condition="RECSQL_UNBOUND_PLACEHOLDER", line=line,
        pos=at - (text.rfind("\n", 0, at) + 1), length=len(marker), sql=text)


def _braced(text: str) -> list[tuple[str, int]]:
    """`{name}` fields (as `SparkSession.sql` reads them: `str.format`), with their offsets;
    none in a text `str.format` cannot read (a `{` inside a string literal)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError:
        return []
    found, cursor = [], 0
    for field in fields:
        at = text.find("{" + field, cursor)
        cursor = at + 1
        found.append((field.split(".")[0].split("[")[0], at))
    return found


def _colon(text: str) -> list[tuple[str, int]]:
    """`:name` markers, found by recsql's own parser (not in strings, not `::` casts); none
    in a statement only Spark parses (it then reports an unbound marker itself)."""
    expression = parse_statement(text).expression
    if expression is None:
        return []
    found = []
    for node in expression.find_all(exp.Placeholder):
        if isinstance(node.this, str):  # `{name}` has an Identifier; `?` has no name
            at = text.find(":" + node.this)
            found.append((node.this, max(at, 0)))
    return sorted(set(found), key=lambda f: f[1])


def in_cell(error: RecSQLError, piece: Piece, cell: str) -> str:
    """The error as spark-sql prints it, its caret under the cell's own text: its position in the
    statement as run (`error.sql`: the `{name}` markers filled in) is mapped back by aligning
    that text with the statement as written (they differ only where a marker was filled in; a
    position inside a filled-in value points at its marker)."""
    head = f"[{error.condition}] {error.message}"
    if error.line is None or error.sql is None:
        return head
    ran = _offset(error.sql, error.line, error.pos or 0)
    at = piece.offset + _align(error.sql, piece.text, ran)
    line = cell.count("\n", 0, at) + 1
    pos = at - (cell.rfind("\n", 0, at) + 1)
    return f"{head} (line {line}, pos {pos})\n\n== SQL ==\n{caret_block(cell, line, pos, error.length)}"


def _offset(text: str, line: int, pos: int) -> int:
    lines = text.split("\n")
    line = min(max(line, 1), len(lines))
    return sum(len(x) + 1 for x in lines[: line - 1]) + min(pos, len(lines[line - 1]))


def _align(ran: str, written: str, offset: int) -> int:
    if ran == written:
        return offset
    matcher = difflib.SequenceMatcher(None, ran, written, autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if i1 <= offset < i2 or (offset == i2 == len(ran)):
            return j1 + (offset - i1) if tag == "equal" else j1
    return min(offset, len(written))
