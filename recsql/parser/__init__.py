"""Stage 1: text -> statements -> sqlglot ASTs in the `rasql` dialect.

`split_statements` cuts a script at top-level `;` keeping each statement's original text (what is
passed to Spark untouched); `parse_statement` parses one statement and turns sqlglot's errors into
`RecSQLParseError` with spark-sql's line/pos.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from recsql.errors import RecSQLParseError
from recsql.parser.dialect import AggregateColumn, CreateAggregate, DropAggregate, RaSQL

__all__ = ["AggregateColumn", "CreateAggregate", "DropAggregate", "RaSQL", "Statement", "parse_statement",
           "split_statements"]

DIALECT = "rasql"
EXPLAIN_MODES = {"EXTENDED", "FORMATTED", "CODEGEN", "COST", "SIMPLE"}


@dataclass(frozen=True)
class Statement:
    """One parsed statement.

    `text` is the original statement text; `expression` is the AST (None when sqlglot cannot
    parse a statement that needs no recsql feature: it then goes to Spark verbatim);
    `explain` is the EXPLAIN mode (`"SIMPLE"`, `"EXTENDED"`, ...) or None.
    """

    text: str
    expression: exp.Expr | None
    explain: str | None = None


def tokenize(text: str) -> list[Token]:
    try:
        return RaSQL().tokenize(text)
    except TokenError as error:
        raise _token_error(error, text) from None


def split_statements(text: str) -> list[str]:
    """The statements of a script, each as its original text, without the separating `;`."""
    statements, start = [], 0
    for token in tokenize(text):
        if token.token_type == TokenType.SEMICOLON:
            statements.append(text[start : token.start])
            start = token.end + 1
    statements.append(text[start:])
    return [s for s in statements if s.strip() and _has_tokens(s)]


def _has_tokens(text: str) -> bool:
    return bool(tokenize(text))


def parse_statement(text: str) -> Statement:
    """Parse one statement. EXPLAIN [mode] is peeled off here; the rest keeps its positions."""
    tokens = tokenize(text)
    explain, body = None, text
    if tokens and tokens[0].text.upper() == "EXPLAIN":
        explain, body = _peel_explain(text, tokens[0].end + 1)
    try:
        expression = _parse(body)
    except ParseError as error:
        if not any(t.token_type == TokenType.WITH for t in tokens) and not _declares_aggregate(tokens):
            # No CTE, so nothing recsql adds: let Spark parse it (and report its own errors).
            return Statement(text, None, explain)
        raise _parse_error(error, text) from None
    _check_aggregate_columns(expression, text)
    return Statement(text, expression, explain)


def _declares_aggregate(tokens: list[Token]) -> bool:
    """`CREATE [OR REPLACE] [TEMPORARY] AGGREGATE` or `DROP [TEMPORARY] AGGREGATE`: recsql's own
    statements, whose syntax errors are recsql's to report (Spark has no such statement)."""
    if not tokens or tokens[0].token_type not in (TokenType.CREATE, TokenType.DROP):
        return False
    words = [t.text.upper() for t in tokens[1:5]]
    return "AGGREGATE" in words and all(w in {"OR", "REPLACE", "TEMPORARY", "TEMP"}
                                        for w in words[:words.index("AGGREGATE")])


def _parse(body: str) -> exp.Expr:
    """`sqlglot.parse_one`, except that where sqlglot's parser itself fails on malformed input
    (`SELECT 0{=` raised AttributeError in sqlglot 30.30) the failure is a ParseError at the token
    the parser had reached."""
    dialect = RaSQL()
    parser = dialect.parser(error_level=ErrorLevel.RAISE)
    try:
        result = parser.parse(dialect.tokenize(body), body)
    except (ParseError, TokenError):
        raise
    except Exception:  # noqa: BLE001 - a parser bug is still the user's syntax error
        token = parser._curr or parser._prev
        raise ParseError.new(
            f"Invalid syntax near `{token.text}`" if token else "Invalid syntax",
            line=token.line if token else None, col=token.col if token else None,
            highlight=token.text if token else None) from None
    if not result or result[0] is None:
        raise ParseError(f"No expression was parsed from '{body}'")
    return exp.Block(expressions=result) if len(result) > 1 else result[0]


def _peel_explain(text: str, offset: int) -> tuple[str, str]:
    """(mode, body) of `EXPLAIN [mode] body`; the body keeps the positions it has in `text`.

    sqlglot lexes everything after EXPLAIN as one raw string, so the rest is lexed again here.
    """
    rest = [t for t in tokenize(text[offset:])]
    mode = "SIMPLE"
    if rest and rest[0].text.upper() in EXPLAIN_MODES:
        mode, rest = rest[0].text.upper(), rest[1:]
    if not rest:
        raise RecSQLParseError("EXPLAIN needs a statement after it", line=1, pos=0, sql=text)
    start = offset + rest[0].start
    # Blank the prefix instead of cutting it, so error positions stay those of `text`.
    return mode, re.sub(r"[^\n]", " ", text[:start]) + text[start:]


def _check_aggregate_columns(expression: exp.Expr, text: str) -> None:
    """`min() AS c` is only meaningful in a CTE head, not in `FROM t AS x(min() AS c)`."""
    for column in expression.find_all(AggregateColumn):
        alias = column.parent
        if not (isinstance(alias, exp.TableAlias) and isinstance(alias.parent, exp.CTE)):
            raise RecSQLParseError(
                f"Aggregate column `{column.sql('rasql')}` is only allowed in the "
                "column list of a WITH (CTE) head",
                line=column.meta.get("line"),
                pos=_pos(text, column.meta.get("start")),
                sql=text,
            )


def _pos(text: str, start: int | None) -> int | None:
    """0-based column of character offset `start` (spark-sql's `pos`)."""
    if start is None:
        return None
    return start - (text.rfind("\n", 0, start) + 1)


def _parse_error(error: ParseError, text: str) -> RecSQLParseError:
    first = error.errors[0] if error.errors else {}
    description = first.get("description") or str(error)
    line, col = first.get("line"), first.get("col")
    highlight = first.get("highlight") or ""
    pos = None
    if line is not None and col is not None:
        # sqlglot's `col` is the 1-based column of the token's last character.
        pos = max(0, col - len(highlight)) if highlight else max(0, col - 1)
    return RecSQLParseError(
        f"Syntax error: {description}",
        condition="PARSE_SYNTAX_ERROR",
        line=line,
        pos=pos,
        length=len(highlight) or 1,
        sql=text,
    )


def _token_error(error: TokenError, text: str) -> RecSQLParseError:
    start = getattr(error, "start", None)
    line = text.count("\n", 0, start) + 1 if start is not None else None
    return RecSQLParseError(
        f"Cannot tokenize: {error}".split("\n")[0],
        condition="PARSE_SYNTAX_ERROR",
        line=line,
        pos=_pos(text, start),
        sql=text,
    )
