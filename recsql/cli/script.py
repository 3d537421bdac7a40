"""Where a script comes from, and its file paths made relative to the script's own folder.

Spark resolves a relative `path` against the JVM's working directory, not the script's folder,
so `CREATE ... USING csv OPTIONS (path 'data/x.csv')` and `LOCATION 'x'` get an absolute path
before the statement is run. Only those string literals change; the rest keeps its text.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from sqlglot.tokens import TokenType

from recsql import RecSQLParseError
from recsql.parser import tokenize

URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # file:, s3a://, hdfs://


@dataclass(frozen=True)
class Source:
    """The text of a script, the folder its relative paths are read from, and a name for it."""

    text: str
    base: str
    name: str


def from_file(path: str) -> Source:
    if path == "-":
        return from_stdin()
    with open(path, encoding="utf-8") as stream:
        return Source(stream.read(), os.path.dirname(os.path.abspath(path)), path)


def from_stdin() -> Source:
    return Source(sys.stdin.read(), os.getcwd(), "<stdin>")


def from_text(text: str) -> Source:
    return Source(text, os.getcwd(), "<-e>")


def rewrite_paths(statement: str, base: str) -> str:
    """`statement` with the relative paths of a CREATE ... USING statement made absolute."""
    try:
        tokens = tokenize(statement)
    except RecSQLParseError:  # the engine reports the statement's tokenizer error itself
        return statement
    if not tokens or tokens[0].token_type != TokenType.CREATE:
        return statement
    pieces, last = [], 0
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.STRING and _names_a_path(tokens, index):
            absolute = resolve(token.text, base)
            if absolute != token.text:
                pieces += [statement[last:token.start], quote(absolute)]
                last = token.end + 1
    return "".join(pieces) + statement[last:] if pieces else statement


def _names_a_path(tokens, index: int) -> bool:
    """The string follows `path`, `path =` or `LOCATION`."""
    before = [t.text.lower() for t in tokens[max(0, index - 2):index]]
    if before[-1:] == ["location"] or before[-1:] == ["path"]:
        return True
    return before == ["path", "="]


def resolve(path: str, base: str) -> str:
    if os.path.isabs(path) or URI.match(path):
        return path
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
