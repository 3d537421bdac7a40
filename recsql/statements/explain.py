"""EXPLAIN [mode] of a query: the recursive plan, then Spark's physical plan of one iteration of
the first recursive group, built over stand-ins of its states without running a Spark job
(`Executor.iteration_plan`). A query that needs no recsql feature is explained by Spark."""

from __future__ import annotations

from sqlglot import exp

from recsql.planner import render_plan
from recsql.statements import stages
from recsql.statements.request import Request, Result


def run(request: Request, node: exp.Expr) -> Result:
    plan = stages.plan(request, stages.bind(request, node)) if isinstance(node, exp.Query) else None
    if plan is None:
        return Result(df=request.passthrough(), kind="explain")
    analysed = stages.analyse(request, plan)
    mode = request.statement.explain or "SIMPLE"
    text = "\n".join([render_plan(plan), *request.executor.iteration_plan(analysed, mode)])
    df = request.spark.createDataFrame([(text,)], "plan string")
    return Result(df=df, plan=plan, kind="explain")
