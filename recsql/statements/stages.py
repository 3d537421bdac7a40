"""The stages of a statement's query, one function each, each `stage(request, x) -> y`:

    bind     the query with the recursive views it reads expanded into CTEs
    plan     recursive groups, strata, delta rules, pushed filters (None: Spark runs it alone)
    analyse  the plan typed: every recursive CTE's head schema, the checks that need types
             (Spark analyses, no Spark job)
    execute  the answer, on Spark

A statement handler (`recsql.statements.<form>`) chains the ones it needs, as
`sqlglot.executor.execute` chains optimize -> plan -> execute."""

from __future__ import annotations

from sqlglot import exp

from recsql.executor.analysis.stage import AnalysedPlan
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
from recsql.planner import QueryPlan, plan_query
from recsql.planner.views import Expansion, expand_views
from recsql.statements.request import Request, Result


def bind(request: Request, query: exp.Query) -> Expansion:
    """`query` with the recursive views it reads expanded into CTEs, read from the catalog."""
    with quiet_pyspark_error_logs():
        return expand_views(query, request.catalog, request.text)


def plan(request: Request, bound: Expansion) -> QueryPlan | None:
    """The recursive plan of the bound query (its names resolved against the catalog), or None
    when it needs no recsql feature."""
    with quiet_pyspark_error_logs():
        return plan_query(bound.query, request.text, request.catalog,
                          demand=request.settings.demand_enabled)


def analyse(request: Request, plan: QueryPlan) -> AnalysedPlan:
    """The plan as the executor receives it: every recursive group's head types, inferred as
    Spark types a UNION, and every error that needs them, at its place
    (`recsql.executor.analysis.stage`). Spark analyses the branches; no Spark job runs."""
    with quiet_pyspark_error_logs():
        return request.executor.analyse(plan)


def execute(request: Request, analysed: AnalysedPlan) -> Result:
    evaluated = request.executor.execute(analysed)
    return Result(df=evaluated.df, stats=evaluated.stats, plan=analysed.plan)
