"""A query: run by recsql when it needs recursion, else by Spark as written."""

from __future__ import annotations

from sqlglot import exp

from recsql.statements import stages
from recsql.statements.request import Request, Result


def run(request: Request, query: exp.Query) -> Result:
    plan = stages.plan(request, stages.bind(request, query))
    if plan is None:
        return Result(df=request.passthrough())
    return stages.execute(request, stages.analyse(request, plan))
