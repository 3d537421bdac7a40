"""Recursive views in Spark's catalog.

A recursive view is stored as a Spark view with the recursive query's column names and types,
whose body raises an error saying to read it through recsql, and with the recsql definition in
its table properties. So `SHOW TABLES`, `DESCRIBE`, JDBC metadata and the metastore see a view
like any other, recsql reads the definition and expands it into the reading statement
(`recsql.planner.views`), and plain Spark fails loudly instead of answering from stale rows.

Every row and every column of the stub goes through `raise_error`: a filter on a constant column
would be folded away, `count(*)` would count a constant row. Only a query whose answer needs no
row of the view at all (`WHERE false`, `LIMIT 0`) returns without the error, and its (empty)
answer is then right.

A temporary view has no table properties; it carries the definition in its first column's
metadata, with the view's name, so that a view Spark derives from it (whose columns inherit the
metadata) is not taken for it.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from recsql.executor.analysis.spark_types import type_sql
from recsql.planner.catalog import StoredView

DEFINITION = "recsql.definition"
PARTS = "recsql.definition.numParts"
PART = "recsql.definition.part."
VIEW = "recsql.view"
# A Hive metastore keeps a table property value in a VARCHAR(4000) (Spark splits its own long
# schema properties at the same length, spark.sql.sources.schemaStringLengthThreshold).
PART_LENGTH = 4000


MARKER = "[RECSQL_RECURSIVE_VIEW]"


def message(name: str) -> str:
    return (f"{MARKER} {name} is a recursive view of recsql, which Spark cannot "
            "evaluate by itself: read it through recsql (recsql.sql, the recsql command or "
            "recsql serve)")


def stored_view(spark: SparkSession, name: str,
                frame: Callable[[], DataFrame] | None = None) -> StoredView | None:
    """The recursive view `name` resolves to in `spark`'s catalog, or None. `frame`: the
    statement's `spark.table(name)` if the caller has it (each call is a Spark analysis)."""
    try:
        table = spark.catalog.getTable(name)
    except AnalysisException:  # not found, or not a name Spark parses
        return None
    if table.isTemporary:
        fields = (frame() if frame else spark.table(name)).schema.fields
        meta = fields[0].metadata if fields else {}
        if meta.get(VIEW, "").lower() != table.name.lower() or DEFINITION not in meta:
            return None
        return StoredView(table.name, meta[DEFINITION], tuple(f.name for f in fields), temporary=True)
    if (table.tableType or "").upper() != "VIEW":
        return None
    qualified = _qualified(table.catalog, table.namespace or [], table.name)
    properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {qualified}").collect()}
    if PARTS not in properties or not _stub_body(spark, qualified):
        return None
    text = "".join(properties[f"{PART}{i}"] for i in range(int(properties[PARTS])))
    columns = tuple(spark.table(qualified).columns)
    return StoredView(".".join([*(table.namespace or []), table.name]), text, columns)


def _stub_body(spark: SparkSession, qualified: str) -> bool:
    """Whether the view's Spark body is still recsql's stub: `ALTER VIEW v AS ...` by plain Spark
    replaces the body and keeps the properties, and then the view is what Spark now holds."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    text = next((r[1] for r in rows if r[0] == "View Text"), None) or ""
    return MARKER in text


def create_temporary(spark: SparkSession, name: str, schema: StructType, text: str) -> None:
    """Register (or replace) the temporary recursive view `name`."""
    error = F.raise_error(F.lit(message(name)))
    columns: list[Column] = []
    for i, field in enumerate(schema.fields):
        meta = {VIEW: name, DEFINITION: text} if i == 0 else {}
        columns.append(error.cast(field.dataType).alias(field.name, metadata=meta))
    stub: DataFrame = spark.range(1).where(error.cast("boolean")).select(*columns)
    stub.createOrReplaceTempView(name)


def create_statement(table: exp.Table, schema: StructType, text: str, *, replace: bool,
                     if_not_exists: bool) -> str:
    """`CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name TBLPROPERTIES (...) AS <stub>`."""
    name = table.sql("rasql")
    error = exp.Anonymous(this="raise_error", expressions=[exp.Literal.string(message(name))])
    stub = exp.select(*[
        exp.alias_(exp.Cast(this=error.copy(), to=exp.DataType.build(type_sql(f.dataType),
                                                                      dialect="spark")),
                   f.name, quoted=True)
        for f in schema.fields
    ]).from_("range(1)").where(exp.Cast(this=error.copy(), to=exp.DataType.build("BOOLEAN")))
    parts = [text[i: i + PART_LENGTH] for i in range(0, len(text), PART_LENGTH)] or [""]
    properties = {PARTS: str(len(parts)), **{f"{PART}{i}": part for i, part in enumerate(parts)}}
    create = exp.Create(
        this=table, kind="VIEW", replace=replace, exists=if_not_exists, expression=stub,
        properties=exp.Properties(expressions=[
            exp.Property(this=exp.Literal.string(k), value=exp.Literal.string(v))
            for k, v in properties.items()]))
    return create.sql("spark")


def _qualified(catalog: str | None, namespace: list[str], name: str) -> str:
    parts = [p for p in [catalog, *namespace, name] if p]
    return ".".join(exp.to_identifier(p, quoted=True).sql("spark") for p in parts)
