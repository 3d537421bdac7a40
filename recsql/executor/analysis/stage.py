"""Stage 4: analyse a plan. Every recursive group's head types, inferred before anything runs
as Spark infers a UNION's: widened over the base branches, then over the recursive branches
analysed (no job) against the types found so far, until nothing widens; sum/count heads take
Spark's sum type. With them the checks that need types (a branch's width and types against its
head, SEARCH/CYCLE columns Spark must compare, min/max and payload columns it must order), each
error at its place in the statement. Spark analyses the branches; no Spark job runs.

The executor receives the `AnalysedPlan` and builds each group's states from its schemas;
EXPLAIN and CREATE VIEW stop here."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, StructField, StructType
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.executor.analysis.plain_types import plain_types
from recsql.executor.analysis.spark_types import (
    INTEGRAL,
    castable,
    empty,
    null_columns,
    orderable,
    sum_type,
    type_sql,
    widened,
)
from recsql.executor.loop.protocols import Context
from recsql.executor.loop.spark_sql import query_df, quiet_pyspark_error_logs, render, run_sql
from recsql.executor.state.relations import CONTRIB
from recsql.parser.locate import locate
from recsql.planner.model import Branch, CTEPlan, GroupStep, HeadColumn, QueryPlan, ViewStep, cte_binding


@dataclass(frozen=True)
class AnalysedPlan:
    """A plan with every recursive CTE's head schema (by CTE key), as the executor runs it."""

    plan: QueryPlan
    schemas: Mapping[str, StructType]

    def group_schemas(self, group: GroupStep) -> dict[str, StructType]:
        return {cte.key: self.schemas[cte.key] for cte in group.ctes}


def analyse(ctx: Context, plan: QueryPlan) -> AnalysedPlan:
    """Type `plan`'s groups in order, each over the types of the steps before it: a plain CTE
    as Spark analyses it, a recursive group's CTEs as empty relations of their head types."""
    schemas: dict[str, StructType] = {}
    # the plain CTEs after the last recursive group type nothing here (each would cost a Spark
    # analysis; the final query reads them)
    last = max((i for i, step in enumerate(plan.steps) if isinstance(step, GroupStep)), default=-1)
    with quiet_pyspark_error_logs():
        for step in plan.steps[:last + 1]:
            if isinstance(step, GroupStep):
                schemas.update(infer_schemas(ctx, step))
            bind_unevaluated(ctx, step, schemas)
    return AnalysedPlan(plan, MappingProxyType(schemas))


def bind_unevaluated(ctx: Context, step: ViewStep | GroupStep, schemas: Mapping[str, StructType]) -> None:
    """Bind `step`'s CTEs in `ctx.env` as later steps are typed over them (no job): a plain CTE
    as Spark analyses it, a recursive CTE as an empty relation of its head types."""
    if isinstance(step, ViewStep):
        df = query_df(ctx.spark, step.query, ctx.env, ctx.args, ctx.sql)
        ctx.env[cte_binding(step.name)] = df.toDF(*step.columns) if step.columns else df
        return
    for cte in step.ctes:
        ctx.env[cte_binding(cte.key)] = empty(ctx.spark, schemas[cte.key])


def answer_type(ctx: Context, analysed: AnalysedPlan) -> DataFrame:
    """The answer's columns and types with no Spark job: every CTE bound as `bind_unevaluated`
    binds it, the final query analysed over them. As Spark analyses a view's body when it is
    created, without running it."""
    with quiet_pyspark_error_logs():
        for step in analysed.plan.steps:
            bind_unevaluated(ctx, step, analysed.schemas)
        return query_df(ctx.spark, analysed.plan.final, ctx.env, ctx.args, ctx.sql)


def with_contributor(cte: CTEPlan, branch: Branch, select=None):
    """A recursive sum/count branch also selects its contributor's identity (`select`: the
    branch's select as run, if not `branch.select`)."""
    select = branch.select if select is None else select
    if not (cte.summing and branch.recursive):
        return select
    select = select.copy()
    parts: list[exp.Expr] = [exp.Literal.string("b"), exp.Literal.number(branch.index)]
    for i, expr in enumerate(branch.contributor):
        parts += [exp.Literal.string(f"c{i}"), expr.copy()]
    identity = exp.Anonymous(this="TO_JSON", expressions=[exp.Anonymous(this="NAMED_STRUCT", expressions=parts)])
    return select.select(exp.alias_(identity, CONTRIB, quoted=True), copy=False)


def _text(cte: CTEPlan, branch: Branch) -> str:
    return render(with_contributor(cte, branch), escape_braces=True)


def _branch_df(ctx: Context, cte: CTEPlan, branch: Branch, refs: dict[str, DataFrame]) -> DataFrame:
    """The branch over the statement's bindings, `refs` and its base tables as they are: typing
    needs no pre-partitioned (checkpointed) base."""
    bindings = {**ctx.env, **refs}
    bindings.update({b.binding: ctx.spark.table(b.table.sql) for b in branch.bases})
    text = _text(cte, branch)
    used = {k: v for k, v in bindings.items() if "{" + k + "}" in text}
    return run_sql(ctx.spark, text, used, ctx.args, ctx.sql, branch.select)


def _typed_branch(ctx: Context, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> DataFrame:
    """The branch analysed over its base tables and empty relations of the `refs` types (by
    binding), for its output types.

    Written into the branch's text where it can be: the base tables by name, the references as
    `(SELECT CAST(NULL AS t) AS c, ... FROM range(0))`. Binding DataFrames instead costs pyspark
    a temporary view registered and dropped per binding (a branch with two took 0.15 s on a
    loaded local[2], where the text took 0.01 s), and typing runs for every statement. A branch
    that reads anything else (an earlier CTE, a DataFrame argument), a type the text cannot
    spell, or an analysis error, is typed with the DataFrames bound, as the loop runs it."""
    text = _text(cte, branch)
    spelled = {b.binding: b.table.sql for b in branch.bases}
    spelled.update({r.binding: _empty_relation(refs[r.binding]) for r in branch.refs
                    if all(castable(f.dataType) for f in refs[r.binding].fields)})
    try:
        names = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
        if names <= spelled.keys():
            with quiet_pyspark_error_logs():
                return ctx.spark.sql(text.format(**spelled), args=_used_args(text, ctx.args))
    except (PySparkException, ValueError, KeyError, IndexError):
        pass  # typed again below, where a real error is reported as the loop reports it
    frames = {r.binding: empty(ctx.spark, refs[r.binding]) for r in branch.refs}
    return _branch_df(ctx, cte, branch, frames)


def _empty_relation(schema: StructType) -> str:
    return f"(SELECT {', '.join(null_columns(schema))} FROM range(0))"


def _used_args(text: str, args: dict | None) -> dict | None:
    return {k: v for k, v in (args or {}).items() if re.search(rf":{re.escape(k)}\b", text)} or None


def infer_schemas(ctx: Context, group: GroupStep) -> dict[str, StructType]:
    """Head types: Spark's UNION widening over the base branches, then over the recursive
    branches evaluated (analysis only, no job) against the types found so far."""
    types: dict[str, list[DataType] | None] = {}
    for cte in group.ctes:
        types[cte.key] = None
        for branch in cte.base_branches:
            types[cte.key] = _widen(ctx.spark, types[cte.key],
                                    _types(ctx, cte, branch, {}), cte, branch, ctx.sql)
    for cte in group.ctes:  # before a recursive term compares them
        _check_compared_types(cte, types[cte.key], ctx.sql)
    for _ in range(1 + 2 * len(group.ctes)):
        changed = False
        for cte in group.ctes:
            for branch in cte.recursive_branches:
                ref_types = {r.cte: types[r.cte] for r in branch.refs}
                known = {key: t for key, t in ref_types.items() if t is not None}
                if len(known) < len(ref_types):
                    continue
                refs = {r.binding: _schema(group, r.cte, known[r.cte]) for r in branch.refs}
                wider = _widen(ctx.spark, types[cte.key],
                                 _types(ctx, cte, branch, refs), cte, branch, ctx.sql)
                if wider != types[cte.key]:
                    types[cte.key], changed = wider, True
        if not changed:
            break
    schemas = {cte.key: _final_schema(ctx.spark, cte, types[cte.key], ctx.sql) for cte in group.ctes}
    for cte in group.ctes:
        _check_ranked_types(cte, schemas[cte.key], ctx.sql)
        # again once widened: an anchor's NULL may become a map only in a recursive term
        _check_compared_types(cte, types[cte.key], ctx.sql)
    return schemas


def _types(ctx: Context, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> list[DataType]:
    """The branch's output types: read off its relations' schemas where it is plain
    (`plain_types`, no Spark analysis), else from Spark's analysis of it."""
    known = _plain_types(ctx, cte, branch, refs)
    if known is None:
        return _branch_types(cte, branch, _typed_branch(ctx, cte, branch, refs), ctx.sql)
    check_width(cte, branch, len(known), ctx.sql)
    return known


def _plain_types(ctx: Context, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> list[DataType] | None:
    """`plain_types` over the branch's references (`refs`) and its base tables as the statement
    already read them (`Context.tables`, analysed when it was planned: their schemas are at
    hand). A summing CTE's recursive branches carry a contributor column; they go to Spark."""
    if cte.summing:
        return None
    frames = {b.binding: ctx.tables.get(b.table) for b in branch.bases}

    def schema_of(table: exp.Table) -> StructType | None:
        binding = table.this.name
        if binding in refs:
            return refs[binding]
        frame = frames.get(binding)
        return None if frame is None else frame.schema

    return plain_types(branch.select, schema_of, lambda: _case_sensitive(ctx.spark))


def _case_sensitive(spark: SparkSession) -> bool:
    return (spark.conf.get("spark.sql.caseSensitive", "false") or "false").lower() == "true"


def _check_ranked_types(cte: CTEPlan, schema: StructType, sql: str) -> None:
    """A min()/max() column and its payload are compared by Spark's ordering, which a map (or
    a variant, or a struct or array holding one) does not have: say so before Spark does."""
    for column in cte.head:
        if column.agg not in {"min", "max"} and column.of is None:
            continue
        dtype = schema[column.name].dataType
        if not orderable(dtype):
            role = "a payload column" if column.of is not None else f"a {column.agg}() column"
            raise RecSQLAnalysisError(
                f"Column `{column.name}` of CTE `{cte.name}` is {role} of type "
                f"{dtype.simpleString()}, which Spark cannot order, so no derivation can win: "
                "give it an orderable type (e.g. `to_json(...)` for a map) or compute it in the "
                "final query",
                condition="RECSQL_UNORDERABLE_AGGREGATE",
                sql=sql,
                **column.location,
            )


def _check_compared_types(cte: CTEPlan, types: list[DataType] | None, sql: str) -> None:
    """A SEARCH column is ordered by (`ORDER BY seq`), a CYCLE column compared with the path
    (is this row on it?); Spark can do neither with a map (or a variant, or a struct or array
    holding one). PostgreSQL's words, at the column in the clause."""
    if types is None:
        return
    index = {name.lower(): i for i, name in enumerate(cte.columns)}
    for column in cte.compared:
        dtype = types[index[column.name.lower()]]
        if orderable(dtype):
            continue
        operator, purpose = (("an ordering", "order the rows by it (ORDER BY the sequence column)")
                             if column.clause == "SEARCH" else
                             ("an equality", "tell whether a row is already on the path"))
        raise RecSQLAnalysisError(
            f"could not identify {operator} operator for type {dtype.simpleString()}: "
            f"{column.clause} column \"{column.name}\" of CTE `{cte.name}`, which Spark needs to "
            f"{purpose}; {column.clause} by columns of other types, or by `to_json({column.name})` "
            "computed as a column of the CTE",
            condition="RECSQL_SEARCH_CYCLE", sql=sql, **column.location)


def _branch_types(cte: CTEPlan, branch: Branch, df: DataFrame, sql: str) -> list[DataType]:
    fields = df.schema.fields
    if cte.summing and branch.recursive:
        fields = fields[:-1]
    check_width(cte, branch, len(fields), sql)
    return [f.dataType for f in fields]


def check_width(cte: CTEPlan, branch: Branch, width: int, sql: str) -> None:
    if width != len(cte.head):
        raise RecSQLAnalysisError(
            f"Branch {branch.index} of CTE `{cte.name}` yields {width} column(s) but the head "
            f"has {len(cte.head)} ({', '.join(cte.columns)}); make them agree",
            condition="RECSQL_HEAD_BRANCH_MISMATCH",
            sql=sql,
            **locate(branch.select, sql),
        )


def _widen(spark, known: list[DataType] | None, new: list[DataType],
           cte: CTEPlan, branch: Branch, sql: str) -> list[DataType]:
    """Spark's own UNION type widening (rule 3 of docs/dialect.md section 3)."""
    if known is None:
        return new
    found = widened(spark, known, new)
    if found is None:
        pairs = [
            f"{c.name}: {k.simpleString()} vs {n.simpleString()}"
            for c, k, n in zip(cte.head, known, new) if k != n
        ]
        raise RecSQLAnalysisError(
            f"Branch {branch.index} of CTE `{cte.name}` yields types that do not agree with the "
            f"other branches ({'; '.join(pairs)}); cast them to a common type",
            condition="RECSQL_HEAD_BRANCH_TYPE_MISMATCH",
            **locate(branch.select, sql),
        )
    return found


def _schema(group: GroupStep, key: str, types: list[DataType]) -> StructType:
    cte = next(c for c in group.ctes if c.key == key)
    return StructType([StructField(c.name, t, True) for c, t in zip(cte.head, types)])


def _final_schema(spark: SparkSession, cte: CTEPlan, types: list[DataType] | None, sql: str) -> StructType:
    if types is None:
        raise RecSQLAnalysisError(
            f"Cannot determine the column types of CTE `{cte.name}`: none of its branches can "
            "be evaluated without it; give the recursive group a base branch",
            condition="RECSQL_NO_BASE_BRANCH",
        )
    fields = []
    for column, dtype in zip(cte.head, types):
        if column.agg in {"sum", "count"}:
            dtype = sum_type(dtype)
        elif column.declared is not None:
            dtype = _declared_type(spark, cte, column, dtype, sql)
        elif column.agg in _JOIN_TYPES and not isinstance(dtype, _JOIN_TYPES[column.agg][0]):
            raise RecSQLAnalysisError(
                f"Column `{column.name}` of CTE `{cte.name}` is a {column.agg}() column of type "
                f"{dtype.simpleString()}; {column.agg} merges {_JOIN_TYPES[column.agg][1]} values: "
                "cast the value its branches yield",
                condition="RECSQL_HEAD_AGGREGATE_TYPE", sql=sql, **column.location)
        fields.append(StructField(column.name, dtype, True))
    return StructType(fields)


# Spark's own joins in heads: the types each merges
_JOIN_TYPES: dict[str, tuple[type[DataType] | tuple[type[DataType], ...], str]] = {
    "bit_or": (INTEGRAL, "integral (TINYINT to BIGINT)"), "bit_and": (INTEGRAL, "integral (TINYINT to BIGINT)"),
    "bool_or": (BooleanType, "BOOLEAN"), "bool_and": (BooleanType, "BOOLEAN"),
}


def _declared_type(spark: SparkSession, cte: CTEPlan, column: HeadColumn, dtype: DataType, sql: str) -> DataType:
    """A declared aggregate's column holds values of its type: the branches' values are cast to
    it, as a UNION's to the head's (an analysis, no job)."""
    assert column.declared is not None  # called on declared columns only
    declared = column.declared.type.sql("spark")
    try:
        cast = F.lit(None).cast(dtype).cast(declared).alias("v")
        return spark.range(0).select(cast).schema["v"].dataType
    except PySparkException:
        raise RecSQLAnalysisError(
            f"Column `{column.name}` of CTE `{cte.name}` is a {column.agg}() column: "
            f"{column.agg}'s values are {declared}, and its branches yield "
            f"{dtype.simpleString()}, which does not cast to it; cast the value they yield",
            condition="RECSQL_HEAD_AGGREGATE_TYPE", sql=sql, **column.location) from None


__all__ = ["AnalysedPlan", "analyse", "answer_type", "bind_unevaluated", "check_width", "infer_schemas", "type_sql",
           "with_contributor"]
