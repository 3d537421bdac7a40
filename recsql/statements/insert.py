"""INSERT INTO / OVERWRITE t <recursive query>: the answer written into an existing table."""

from __future__ import annotations

from sqlglot import exp

from recsql.planner.checks import table_not_found
from recsql.planner.names import TableName
from recsql.statements import stages
from recsql.statements.request import Request, Result
from recsql.statements.targets import target, writing


def run(request: Request, node: exp.Insert) -> Result:
    plan = stages.plan(request, stages.bind(request, node.expression))
    if plan is None:
        return Result(df=request.passthrough(), kind="command")
    table = target(node)
    if request.catalog.columns(TableName.of(table)) is None:  # before the fixpoint, as Spark would
        raise table_not_found(table, request.text, request.catalog)
    result = stages.execute(request, stages.analyse(request, plan))
    with writing(table, request.text):
        result.df.write.insertInto(TableName.of(table).sql, overwrite=bool(node.args.get("overwrite")))
    return request.command(result.stats, plan)
