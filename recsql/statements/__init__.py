"""The statement layer: what each statement form does with the stages of its query.

`run(request)` dispatches a parsed statement to its handler, a small function of one module per
form; each chains the stages of `recsql.statements.stages` (bind -> plan -> analyse -> execute)
it needs and does what its form does with the answer: return it, store it, write it, explain
it. A statement recsql does not handle, or one whose query needs no recsql feature, goes to Spark
as the user wrote it. A new form is one more module and one more row of `HANDLERS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from recsql.parser import Statement
from recsql.statements import aggregates, create, explain, insert, materialized, query
from recsql.statements.request import Request, Result

Handler = Callable[[Request, Any], Result]


def _writes_query(kind: type[exp.Expr]) -> Callable[[Statement], bool]:
    def takes(statement: Statement) -> bool:
        node = statement.expression
        return isinstance(node, kind) and isinstance(node.expression, exp.Query)
    return takes


# (form, which statements it takes, its handler), asked in order
HANDLERS: tuple[tuple[str, Callable[[Statement], bool], Handler], ...] = (
    ("aggregate", aggregates.takes, aggregates.run),  # CREATE / DROP AGGREGATE
    ("materialized view", materialized.takes, materialized.run),  # EXPLAIN REFRESH too
    ("explain", lambda s: s.explain is not None, explain.run),
    ("query", lambda s: isinstance(s.expression, exp.Query), query.run),
    ("create", _writes_query(exp.Create), create.run),
    ("insert", _writes_query(exp.Insert), insert.run),
)


def run(request: Request) -> Result:
    """Run `request.statement` with the handler of its form, or on Spark as written (also a
    statement the dialect does not parse: it needs no recsql feature)."""
    node = request.statement.expression
    if node is not None:
        for _, takes, handler in HANDLERS:
            if takes(request.statement):
                return handler(request, node)
    return Result(df=request.passthrough(), kind="command")


__all__ = ["HANDLERS", "Handler", "Request", "Result", "run"]
