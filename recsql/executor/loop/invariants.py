"""A recursive group's loop-invariant scalar subqueries, evaluated once before its loop (issue 38).

The planner marks the scalar subqueries of a recursive branch that read no relation of the
branch's own group and call nothing whose value changes between evaluations
(`planner/invariants.py`, `Branch.invariants`). What they read is complete once the strata before
the group have run, so each is evaluated here, once, on Spark, and the branch runs with its value
as a constant of exactly the subquery's type (`spark_types.constant`): Spark no longer evaluates
it again in every iteration's query, and the driver endgame can take the branch (the constant is
one of its allowed forms).

A subquery stays in its branch, evaluated by Spark where the branch runs as before, wherever
this evaluation does not give one value: Spark does not resolve it alone (it reads a column of
the query around it: a correlated subquery), it has more than one column, it finds more than one
row (Spark then raises SCALAR_SUBQUERY_TOO_MANY_ROWS itself, at the iteration that runs the
branch, as it would without this), it fails (its own error, raised there too), or its type is one
`spark_types.constant` does not spell. No row is the NULL of its type, as Spark makes it.
"""

from __future__ import annotations

import dataclasses
import logging

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType
from sqlglot import exp

from recsql.errors import RecSQLError
from recsql.executor.analysis.spark_types import constant
from recsql.executor.loop.protocols import Context
from recsql.executor.loop.spark_sql import describe_jobs, render, run_sql
from recsql.planner.model import Branch, CTEPlan, GroupStep

log = logging.getLogger(__name__)


def hoisted(ctx: Context, group: GroupStep) -> GroupStep:
    """`group` with the invariant subqueries of its recursive branches replaced by their values
    (the earlier strata bound in `ctx.env`); `group` itself where it has none."""
    if not any(branch.invariants for cte in group.ctes for branch in cte.recursive_branches):
        return group
    values: dict[str, exp.Expr | None] = {}  # a subquery's text -> its constant: each evaluated once
    ctes = [dataclasses.replace(cte, branches=[_with_values(ctx, cte, b, values) for b in cte.branches])
            for cte in group.ctes]
    return dataclasses.replace(group, ctes=ctes)


def _with_values(ctx: Context, cte: CTEPlan, branch: Branch, values: dict[str, exp.Expr | None]) -> Branch:
    if not branch.recursive or not branch.invariants:
        return branch
    copy = dataclasses.replace(branch, select=branch.select.copy())
    replaced = False
    for subquery in copy.invariants:
        text = render(subquery.this, escape_braces=True)
        if text not in values:
            values[text] = _value(ctx, cte, subquery.this, text)
        value = values[text]
        if value is not None:
            subquery.replace(value.copy())
            replaced = True
    return copy if replaced else branch


def _value(ctx: Context, cte: CTEPlan, query: exp.Expr, text: str) -> exp.Expr | None:
    """The value of the subquery `query` (rendered as `text`) as a constant, or None where it
    stays in its branch (see the module)."""
    describe_jobs(ctx.spark, f"recsql: {cte.name} invariant subquery")
    used = {k: v for k, v in ctx.env.items() if "{" + k + "}" in text}
    try:
        df = run_sql(ctx.spark, text, used, ctx.args, ctx.sql, query)
        if len(df.columns) != 1:
            log.info("recsql: a subquery of CTE %s stays in its branch: %d columns", cte.name, len(df.columns))
            return None
        dtype = df.schema.fields[0].dataType
        read = df.toDF("v")
        if isinstance(dtype, TimestampType):  # its instant, not this process's local time
            read = read.select(F.unix_micros("v"))
        rows = read.limit(2).collect()
    # Spark's refusal or failure (the branch then meets it where it runs), or a value Python
    # cannot hold (a DATE beyond year 9999)
    except (RecSQLError, PySparkException, Py4JJavaError, ValueError, OverflowError) as error:
        log.info("recsql: a subquery of CTE %s stays in its branch: %s", cte.name, error)
        return None
    if len(rows) > 1:
        log.info("recsql: a subquery of CTE %s stays in its branch: it finds more than one row", cte.name)
        return None
    value = constant(rows[0][0] if rows else None, dtype)
    if value is None:
        log.info("recsql: a subquery of CTE %s stays in its branch: no constant of type %s",
                 cte.name, dtype.simpleString())
    else:
        log.info("recsql: CTE %s evaluates a subquery once: (%s) = %s", cte.name,
                 query.sql("rasql"), value.sql("rasql"))
    return value


__all__ = ["hoisted"]
