"""Head types of a recursive group, inferred before its first iteration as Spark infers a
UNION's: widened over the base branches, then over the recursive branches analysed (no job)
against the types found so far, until nothing widens; sum/count heads take Spark's sum type."""

from __future__ import annotations

import re
import string

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
    VariantType,
)
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.executor.loop import Loop
from recsql.executor.plain_types import plain_types
from recsql.executor.spark_sql import quiet_pyspark_error_logs
from recsql.executor.state import empty
from recsql.planner.locate import locate
from recsql.planner.model import Branch, CTEPlan, GroupStep


def _tables(run: Loop, branch: Branch) -> dict[str, DataFrame]:
    """The branch's base tables as they are: typing needs no pre-partitioned (checkpointed) base."""
    return {b.binding: run.ctx.spark.table(b.table.sql) for b in branch.bases}


def _typed_branch(run: Loop, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> DataFrame:
    """The branch analysed over its base tables and empty relations of the `refs` types (by
    binding), for its output types.

    Written into the branch's text where it can be: the base tables by name, the references as
    `(SELECT CAST(NULL AS t) AS c, ... FROM range(0))`. Binding DataFrames instead costs pyspark
    a temporary view registered and dropped per binding (a branch with two took 0.15 s on a
    loaded local[2], where the text took 0.01 s), and typing runs for every statement. A branch
    that reads anything else (an earlier CTE, a DataFrame argument), a type the text cannot
    spell, or an analysis error, is typed with the DataFrames bound, as the loop runs it."""
    text = run.text(cte, branch)
    spelled = {b.binding: b.table.sql for b in branch.bases}
    spelled.update({r.binding: _empty_relation(refs[r.binding]) for r in branch.refs
                    if all(_castable(f.dataType) for f in refs[r.binding].fields)})
    try:
        names = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
        if names <= spelled.keys():
            with quiet_pyspark_error_logs():
                return run.ctx.spark.sql(text.format(**spelled), args=_used_args(text, run.ctx.args))
    except (PySparkException, ValueError, KeyError, IndexError):
        pass  # typed again below, where a real error is reported as the loop reports it
    frames = {r.binding: empty(run.ctx.spark, refs[r.binding]) for r in branch.refs}
    return run.branch_df(cte, branch, frames, bases=_tables(run, branch))


def _castable(dtype: DataType) -> bool:
    """Whether `CAST(NULL AS t)` has exactly the type `dtype`: a cast's arrays, maps and structs
    hold nulls (`ARRAY<STRING>` is `containsNull=true`), so a type that says its elements cannot be
    null (Spark's `array(...)` of non-null values) cannot be spelled, and is bound instead."""
    if isinstance(dtype, ArrayType):
        return dtype.containsNull and _castable(dtype.elementType)
    if isinstance(dtype, MapType):
        return dtype.valueContainsNull and _castable(dtype.keyType) and _castable(dtype.valueType)
    if isinstance(dtype, StructType):
        return all(f.nullable and _castable(f.dataType) for f in dtype.fields)
    return True


def _empty_relation(schema: StructType) -> str:
    columns = ", ".join(f"CAST(NULL AS {type_sql(f.dataType)}) AS {_quoted(f.name)}" for f in schema.fields)
    return f"(SELECT {columns} FROM range(0))"


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("spark")


def _used_args(text: str, args: dict | None) -> dict | None:
    return {k: v for k, v in (args or {}).items() if re.search(rf":{re.escape(k)}\b", text)} or None


def type_sql(dtype: DataType) -> str:
    """`dtype` as Spark SQL, struct field names back-quoted: `simpleString` leaves them bare, and
    a SEARCH column's `*DEPTH*` field (PostgreSQL's name) then does not parse."""
    if isinstance(dtype, StructType):
        fields = [f"{_quoted(f.name)}: {type_sql(f.dataType)}" for f in dtype.fields]
        return f"STRUCT<{', '.join(fields)}>"
    if isinstance(dtype, ArrayType):
        return f"ARRAY<{type_sql(dtype.elementType)}>"
    if isinstance(dtype, MapType):
        return f"MAP<{type_sql(dtype.keyType)}, {type_sql(dtype.valueType)}>"
    return dtype.simpleString()


INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def infer_schemas(run: Loop, group: GroupStep) -> dict[str, StructType]:
    """Head types: Spark's UNION widening over the base branches, then over the recursive
    branches evaluated (analysis only, no job) against the types found so far."""
    types: dict[str, list[DataType] | None] = {}
    for cte in group.ctes:
        types[cte.key] = None
        for branch in cte.base_branches:
            types[cte.key] = _widen(run.ctx.spark, types[cte.key],
                                    _types(run, cte, branch, {}), cte, branch, run.ctx.sql)
    for cte in group.ctes:  # before a recursive term compares them
        _check_compared_types(cte, types[cte.key], run.ctx.sql)
    for _ in range(1 + 2 * len(group.ctes)):
        changed = False
        for cte in group.ctes:
            for branch in cte.recursive_branches:
                ref_types = {r.cte: types[r.cte] for r in branch.refs}
                known = {key: t for key, t in ref_types.items() if t is not None}
                if len(known) < len(ref_types):
                    continue
                refs = {r.binding: _schema(group, r.cte, known[r.cte]) for r in branch.refs}
                widened = _widen(run.ctx.spark, types[cte.key],
                                 _types(run, cte, branch, refs), cte, branch, run.ctx.sql)
                if widened != types[cte.key]:
                    types[cte.key], changed = widened, True
        if not changed:
            break
    schemas = {cte.key: _final_schema(cte, types[cte.key]) for cte in group.ctes}
    for cte in group.ctes:
        _check_ranked_types(cte, schemas[cte.key], run.ctx.sql)
        # again once widened: an anchor's NULL may become a map only in a recursive term
        _check_compared_types(cte, types[cte.key], run.ctx.sql)
    return schemas


def _types(run: Loop, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> list[DataType]:
    """The branch's output types: read off its relations' schemas where it is plain
    (`plain_types`, no Spark analysis), else from Spark's analysis of it."""
    known = _plain_types(run, cte, branch, refs)
    if known is None:
        return _branch_types(cte, branch, _typed_branch(run, cte, branch, refs), run.ctx.sql)
    check_width(cte, branch, len(known), run.ctx.sql)
    return known


def _plain_types(run: Loop, cte: CTEPlan, branch: Branch, refs: dict[str, StructType]) -> list[DataType] | None:
    """`plain_types` over the branch's references (`refs`) and its base tables as the statement
    already read them (`Context.tables`, analysed when it was planned: their schemas are at
    hand). A summing CTE's recursive branches carry a contributor column; they go to Spark."""
    if cte.summing:
        return None
    frames = {b.binding: run.ctx.tables.get(b.table) for b in branch.bases}

    def schema_of(table: exp.Table) -> StructType | None:
        binding = table.this.name
        if binding in refs:
            return refs[binding]
        frame = frames.get(binding)
        return None if frame is None else frame.schema

    return plain_types(branch.select, schema_of, lambda: _case_sensitive(run.ctx.spark))


def _case_sensitive(spark: SparkSession) -> bool:
    return (spark.conf.get("spark.sql.caseSensitive", "false") or "false").lower() == "true"


def _check_ranked_types(cte: CTEPlan, schema: StructType, sql: str) -> None:
    """A min()/max() column and its payload are compared by Spark's ordering, which a map (or
    a variant, or a struct or array holding one) does not have: say so before Spark does."""
    for column in cte.head:
        if column.agg not in {"min", "max"} and column.of is None:
            continue
        dtype = schema[column.name].dataType
        if not _orderable(dtype):
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
        if _orderable(dtype):
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


def _orderable(dtype: DataType) -> bool:
    if isinstance(dtype, (MapType, VariantType)):
        return False
    if isinstance(dtype, ArrayType):
        return _orderable(dtype.elementType)
    if isinstance(dtype, StructType):
        return all(_orderable(f.dataType) for f in dtype.fields)
    return True


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


def _widen(spark: SparkSession, known: list[DataType] | None, new: list[DataType],
           cte: CTEPlan, branch: Branch, sql: str) -> list[DataType]:
    """Spark's own UNION type widening (rule 3 of docs/dialect.md section 3)."""
    if known is None or known == new:
        return new
    a = empty(spark, _struct(known))
    b = empty(spark, _struct(new))
    try:
        return [f.dataType for f in a.union(b).schema.fields]
    except AnalysisException:
        pairs = [
            f"{c.name}: {k.simpleString()} vs {n.simpleString()}"
            for c, k, n in zip(cte.head, known, new) if k != n
        ]
        raise RecSQLAnalysisError(
            f"Branch {branch.index} of CTE `{cte.name}` yields types that do not agree with the "
            f"other branches ({'; '.join(pairs)}); cast them to a common type",
            condition="RECSQL_HEAD_BRANCH_TYPE_MISMATCH",
            **locate(branch.select, sql),
        ) from None


def _struct(types: list[DataType]) -> StructType:
    return StructType([StructField(f"c{i}", t, True) for i, t in enumerate(types)])


def _schema(group: GroupStep, key: str, types: list[DataType]) -> StructType:
    cte = next(c for c in group.ctes if c.key == key)
    return StructType([StructField(c.name, t, True) for c, t in zip(cte.head, types)])


def _final_schema(cte: CTEPlan, types: list[DataType] | None) -> StructType:
    if types is None:
        raise RecSQLAnalysisError(
            f"Cannot determine the column types of CTE `{cte.name}`: none of its branches can "
            "be evaluated without it; give the recursive group a base branch",
            condition="RECSQL_NO_BASE_BRANCH",
        )
    fields = []
    for column, dtype in zip(cte.head, types):
        if column.agg in {"sum", "count"}:
            dtype = _sum_type(dtype)
        fields.append(StructField(column.name, dtype, True))
    return StructType(fields)


def _sum_type(dtype: DataType) -> DataType:
    """Spark's sum() result types: integral -> BIGINT, decimal(p, s) -> decimal(38, s)."""
    if isinstance(dtype, INTEGRAL):
        return LongType()
    if isinstance(dtype, DecimalType):
        return DecimalType(38, dtype.scale)
    return dtype
