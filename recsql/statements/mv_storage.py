"""Where a materialized view lives in Spark's catalog, which has no materialized views of its own.

A materialized view `v` is a plain Spark view, `CREATE VIEW v AS SELECT * FROM <answer table>`,
over managed tables of one *version* of it, all named under the reserved prefix
`__recsql_mv_<v>_<version>_` in `v`'s schema: `..._answer` (what the query answered) and
`..._state_<n>` (the fixpoint's final state of each recursive relation, what an incremental
refresh starts from). The view's table properties hold the rest of what a refresh needs: the
definition, the version, the tables of that version, each base relation's identity at that
refresh (for a file-based table its files with sizes and modification times), and when and how
it was last refreshed (which `DESCRIBE TABLE EXTENDED` and `SHOW TBLPROPERTIES` show).

So plain Spark reads the answer (`spark.table("v")`, `SELECT * FROM v`), and a refresh is one
catalog operation: it writes a whole new version beside the old one, then repoints the view at
it with `CREATE OR REPLACE VIEW` (the answer and the properties that describe it switch
together), then drops the old version. A reader sees the old answer or the new one, never a mix;
a refresh that fails before the switch leaves the old version as it was and drops what it wrote.

Long property values are split into parts of `views.PART_LENGTH` characters, as a recursive
view's definition is (a Hive metastore keeps a value in a VARCHAR(4000)).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from sqlglot import exp

from recsql.executor.loop.spark_sql import from_spark_error, quiet_pyspark_error_logs
from recsql.planner.names import TableName
from recsql.statements.views import PART_LENGTH

PREFIX = "__recsql_mv_"
MARK = "recsql.materializedView"  # the storage format's version
FORMAT = "1"
INFO = "recsql.mv"  # the JSON of `Stored`, in parts: recsql.mv.numParts, recsql.mv.part.<i>
REFRESHED_AT, REFRESHED_HOW = "recsql.mv.refreshedAt", "recsql.mv.refreshedHow"


@dataclass
class Stored:
    """One version of a materialized view, as its Spark view's properties describe it.

    `states`: per recursive CTE (by key) its state table and row count; `bases`: per base
    relation (by its name as the definition writes it) its identity (`identity` in
    `recsql.statements.materialized`)."""

    name: TableName
    definition: str
    version: str
    answer: str
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    bases: dict[str, dict[str, Any]] = field(default_factory=dict)
    refreshed_at: str = ""
    refreshed_how: str = ""
    # a digest of the definition with the recursive views it reads expanded: a view replaced
    # since then changes it
    bound: str = ""

    @property
    def tables(self) -> list[str]:
        return [self.answer, *(s["table"] for s in self.states.values())]


def new_version() -> str:
    """A version name no other refresh picks: two refreshes at once write apart."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "_" + uuid.uuid4().hex[:8]


def version_table(name: TableName, version: str, part: str) -> str:
    """A table of `name`'s version, in `name`'s schema, as `spark.table` and `saveAsTable` read
    it (quoted part by part)."""
    base = f"{PREFIX}{name.parts[-1]}_{version}_{part}"
    return TableName((*name.parts[:-1], base)).sql


def read(spark: SparkSession, name: TableName) -> Stored | None:
    """The materialized view `name` resolves to, or None when `name` is none."""
    try:
        with quiet_pyspark_error_logs():
            table = spark.catalog.getTable(name.sql)
    except AnalysisException:
        return None
    if table.isTemporary or (table.tableType or "").upper() != "VIEW":
        return None
    properties = _properties(spark, name)
    if properties.get(MARK) != FORMAT:
        return None
    info = json.loads("".join(properties[f"{INFO}.part.{i}"]
                              for i in range(int(properties[f"{INFO}.numParts"]))))
    return Stored(name=name, definition=info["definition"], version=info["version"],
                  answer=info["answer"], states=info["states"], bases=info["bases"],
                  refreshed_at=properties.get(REFRESHED_AT, ""),
                  refreshed_how=properties.get(REFRESHED_HOW, ""), bound=info.get("bound", ""))


def exists(spark: SparkSession, name: TableName) -> bool:
    """Whether anything (table, view) of the catalog answers to `name`."""
    try:
        with quiet_pyspark_error_logs():
            spark.catalog.getTable(name.sql)
        return True
    except AnalysisException:
        return False


def publish(spark: SparkSession, stored: Stored, *, replace: bool, sql: str) -> None:
    """Point the view `stored.name` at `stored`'s version: one catalog operation."""
    text = json.dumps({"definition": stored.definition, "version": stored.version,
                       "answer": stored.answer, "states": stored.states, "bases": stored.bases,
                       "bound": stored.bound},
                      sort_keys=True)
    parts = [text[i: i + PART_LENGTH] for i in range(0, len(text), PART_LENGTH)] or [""]
    properties = {MARK: FORMAT, f"{INFO}.numParts": str(len(parts)),
                  **{f"{INFO}.part.{i}": part for i, part in enumerate(parts)},
                  REFRESHED_AT: stored.refreshed_at, REFRESHED_HOW: stored.refreshed_how}
    create = exp.Create(
        this=exp.to_table(stored.name.sql, dialect="spark"), kind="VIEW", replace=replace,
        expression=exp.select("*").from_(exp.to_table(stored.answer, dialect="spark")),
        properties=exp.Properties(expressions=[
            exp.Property(this=exp.Literal.string(k), value=exp.Literal.string(v))
            for k, v in properties.items()]))
    try:
        with quiet_pyspark_error_logs():
            spark.sql(create.sql("spark"))
    except AnalysisException as error:
        raise from_spark_error(error, sql) from None


def drop_tables(spark: SparkSession, tables: list[str]) -> None:
    """Drop a version's tables, those that exist (a failed refresh may have written some)."""
    for table in tables:
        with quiet_pyspark_error_logs():
            spark.sql(f"DROP TABLE IF EXISTS {table}")


def drop_view(spark: SparkSession, name: TableName) -> None:
    with quiet_pyspark_error_logs():
        spark.sql(f"DROP VIEW IF EXISTS {name.sql}")


def _properties(spark: SparkSession, name: TableName) -> dict[str, str]:
    with quiet_pyspark_error_logs():
        return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {name.sql}").collect()}
