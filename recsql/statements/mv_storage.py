"""Where a materialized view lives in Spark's catalog, which has no materialized views of its own.

A materialized view `v` is a plain Spark view, `CREATE VIEW v AS SELECT * FROM <answer table>`,
over managed tables of one *version* of it, all named under the reserved prefix
`__recsql_mv_<v>_<version>_` in `v`'s schema: `..._answer` (what the query answered) and
`..._state_<n>` (the fixpoint's final state of each recursive relation, what an incremental
refresh starts from); an answer that is a state as it stands is that state's table (`Stored.answer`
names it), not a copy. The view's table properties hold the rest of what a refresh needs: the
definition, the version, the tables of that version, each base relation's identity at that
refresh (for a file-based table its files with sizes and modification times), and when and how
it was last refreshed (which `DESCRIBE TABLE EXTENDED` and `SHOW TBLPROPERTIES` show).

So plain Spark reads the answer (`spark.table("v")`, `SELECT * FROM v`), and a refresh is one
catalog operation: it writes a whole new version beside the old one (from the driver's rows
without a Spark job where it can: `write`), then repoints the view at
it with `CREATE OR REPLACE VIEW` (the answer and the properties that describe it switch
together), then drops the old version. A reader sees the old answer or the new one, never a mix;
a refresh that fails before the switch leaves the old version as it was and drops what it wrote.

Long property values are split into parts of `views.PART_LENGTH` characters, as a recursive
view's definition is (a Hive metastore keeps a value in a VARCHAR(4000)).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from recsql.executor.endgame.parquet_files import as_written, local, write_parquet
from recsql.executor.loop.spark_sql import from_spark_error, quiet_pyspark_error_logs
from recsql.planner.names import TableName
from recsql.statements.views import PART_LENGTH

PREFIX = "__recsql_mv_"
MARK = "recsql.materializedView"  # the storage format's version
FORMAT = "1"
INFO = "recsql.mv"  # the JSON of `Stored`, in parts: recsql.mv.numParts, recsql.mv.part.<i>
REFRESHED_AT, REFRESHED_HOW = "recsql.mv.refreshedAt", "recsql.mv.refreshedHow"
# the version alone, which a refresh reads back before it publishes (`current_version`)
VERSION = "recsql.mv.version"


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
        """The version's tables, each once (the answer may be a state's table)."""
        return list(dict.fromkeys([self.answer, *(s["table"] for s in self.states.values())]))


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


def current_version(spark: SparkSession, name: TableName) -> str | None:
    """The version `name` points at, from its one property (half the time of reading them all);
    None where `name` is gone. For a view stored without that property (or not a view of
    recsql) Spark answers a sentence instead, which no version equals: `read` it then."""
    try:
        with quiet_pyspark_error_logs():
            rows = spark.sql(f"SHOW TBLPROPERTIES {name.sql} ('{VERSION}')").collect()
    except AnalysisException:
        return None
    return rows[0][1] if rows else None


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
                  REFRESHED_AT: stored.refreshed_at, REFRESHED_HOW: stored.refreshed_how,
                  VERSION: stored.version}
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


def write(spark: SparkSession, table: str, df: DataFrame, rows: Any = None,
          staged: str | None = None) -> str | None:
    """Write `df` as the new managed parquet table `table`. Where `rows` holds df's rows as an
    Arrow table on the driver (the driver finished the fixpoint), df's columns are of
    `parquet_files.ARROW_TYPES` and the table's directory is on a local file system, the driver writes them
    there itself: the table is created empty (a catalog operation), its one parquet file
    written under a hidden name and renamed into place; or, where `staged` is a parquet file of
    those rows the driver wrote already (`recsql.executor.endgame.seeded`), that file is
    hard-linked into place (no row written again). Else Spark writes df (a job that
    serializes the rows again, about 1 s a table at RMAT 2^18). Either way the table is
    complete before the view points at it (`publish`). Returns the table's local directory
    where the driver wrote it there, else None."""
    written_rows = None if rows is None else as_written(rows, df.schema)
    if written_rows is None:
        df.write.saveAsTable(table, format="parquet")
        return None
    columns = [exp.ColumnDef(this=exp.to_identifier(f.name, quoted=True),
                             kind=exp.DataType.build(f.dataType.simpleString(), dialect="spark"))
               for f in df.schema.fields]
    create = exp.Create(this=exp.Schema(this=exp.to_table(table, dialect="spark"), expressions=columns),
                        kind="TABLE", properties=exp.Properties(expressions=[
                            exp.FileFormatProperty(this=exp.Var(this="parquet"))]))
    spark.sql(create.sql("spark"))
    directory = _local_directory(spark, table)
    written = directory and (_linked(directory, staged) or write_parquet(directory, written_rows))
    # Spark lists the file where it was written (not so where Spark runs elsewhere, as a
    # Spark Connect server on another machine may, with a directory of that name here too)
    if not written or [local(f) for f in spark.table(table).inputFiles()] != [written]:
        if written:
            os.remove(written)
        df.write.insertInto(table)
        return None
    return directory


def _linked(directory: str, staged: str | None) -> str | None:
    """A hard link in `directory` to the `staged` parquet file (a link appears whole), under a
    name of Spark's writer; None where there is none or it cannot be linked (another device)."""
    if staged is None:
        return None
    path = os.path.join(directory, f"part-00000-{uuid.uuid4()}-c000.snappy.parquet")
    try:
        os.link(staged, path)
    except OSError:
        return None
    return path


def _local_directory(spark: SparkSession, table: str) -> str | None:
    """The directory of the new (empty) `table`'s files, where this machine has it."""
    path = table_directory(spark, table)
    return path if path and not os.listdir(path) else None


def link_bases(spark: SparkSession, table: str, bases: dict[str, list[str]],
               directory: str | None = None) -> bool:
    """Hard-link each base's files (`bases`: base -> its local file paths) into a hidden
    directory of the version's `table` (a leading dot: Spark and DuckDB skip it), so that a
    later refresh reads the base as it was now, whatever was deleted from it meanwhile; no row
    is copied, and the links go with the table when it is dropped. False, leaving none, where
    it cannot (a table not on this machine, another device, a file gone). `directory`: the
    table's, where `write` found it (one catalog call less)."""
    directory = directory or table_directory(spark, table)
    if directory is None:
        return False
    made: list[str] = []
    try:
        for base, files in bases.items():
            folder = os.path.join(directory, _linked_folder(base))
            os.makedirs(folder, exist_ok=True)
            for i, path in enumerate(files):
                link = os.path.join(folder, f"{i}-{os.path.basename(local(path))}")
                os.link(local(path), link)
                made.append(link)
    except OSError:
        for link in made:
            os.remove(link)
        return False
    return True


def linked_files(spark: SparkSession, table: str, base: str, files: list[str]) -> list[str] | None:
    """The hard links `link_bases` made of `base`'s `files` beside `table`, or None if any is
    missing (the version was stored before links were made, or they could not be)."""
    directory = table_directory(spark, table)
    if directory is None:
        return None
    folder = os.path.join(directory, _linked_folder(base))
    links = [os.path.join(folder, f"{i}-{os.path.basename(local(path))}") for i, path in enumerate(files)]
    return links if all(os.path.isfile(link) for link in links) else None


def _linked_folder(base: str) -> str:
    return ".recsql_base_" + hashlib.sha256(base.encode()).hexdigest()[:16]


def table_directory(spark: SparkSession, table: str) -> str | None:
    """The local directory of `table`'s files, where this machine has it."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    location = next((r[1] or "" for r in rows if r[0] == "Location"), "")
    path = local(location) if location.startswith("file:") else None
    return path if path and os.path.isdir(path) else None


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
