"""The driver's DuckDB database: one per Spark application (`bases.owner`: every session of it,
as they share the kept copies), holding the driver copies of its base
tables as native DuckDB tables, kept across statements (bases.py decides when a copy is still
current and when it leaves).

Each statement runs on its own cursor of the database (a connection of its own: its own temporary
schema, where its states live as temporary tables, and its own registered Arrow tables), so the
statements a server runs side by side never see each other's states, and closing the cursor frees
everything a statement, failed or not, made there. A base copy lives in the database's `main`
schema under a name of its own, read-only once made, and is dropped with the last reference to
its `BaseCopy` (as a kept Arrow copy was freed with its last reference): a statement still
reading a copy that another statement replaced keeps it until it ends.

A native table, not the pulled Arrow table scanned in place: the join of a small delta with the
whole table is a probe of every row either way, and DuckDB probes its own table four times faster
(the 2^20-edge bintree, a one-row delta joined with every edge, one iteration of an ancestors
query: 5.5 ms over the Arrow table, 1.5 ms over the DuckDB table, 19 iterations a statement).
Sorting the copy by the join column gained 0.2 ms more an iteration for 170 ms a table version,
so the copy keeps the pulled order (and one copy serves every join column).

The connection's settings are the database's (DuckDB's `disabled_optimizers`, `memory_limit` and
`temp_directory` are global): the optimizers and the spill directory are set once, the memory
limit by a statement before it runs where the one in force is not about its own (two
statements at once share the last one set; `Database.limit_memory`).
"""

from __future__ import annotations

import functools
import itertools
import logging
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from sqlglot import exp

from recsql.executor.state import bases

log = logging.getLogger(__name__)

# DuckDB's optimizer may skip evaluating an expression whose error Spark raises: its expression
# rewriter turns `i * 2 = 0` into `i = 0` and `i + 1 = 5` into `i = 4`, and its statistics fold
# `(k + 2147483647) IS NULL` to false once a filter proves k not null; so an INT overflow that
# Spark (ANSI) reports gave rows on the driver (tests/executor/test_differential.py). An unknown
# optimizer name fails the attempt, and the fixpoint stays on Spark.
EXACT_OPTIMIZERS = "SET disabled_optimizers = 'expression_rewriter,statistics_propagation'"
_ARROW_IN = "rq_arrow_in"  # the name a pulled Arrow table is registered under while loaded
MAX_PARTS = 8  # the tables a grown base copy's view unions at most (`Database.grown`)


class Database:
    """An application's DuckDB database and its spill directory (DuckDB's ./.tmp otherwise)."""

    def __init__(self) -> None:
        import duckdb  # only here: `import recsql` stays light

        self.con = duckdb.connect()
        self.spill = tempfile.TemporaryDirectory(prefix="recsql-duckdb-")
        self.con.execute(EXACT_OPTIMIZERS)
        self.con.execute(_set("temp_directory", self.spill.name))
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._memory_limit: int | None = None  # bytes, as last set
        weakref.finalize(self, _close, self.con, self.spill).atexit = False

    def cursor(self) -> Any:
        """A statement's own connection to the database."""
        return self.con.cursor()

    def limit_memory(self, cursor: Any, limit: int) -> None:
        """DuckDB's memory limit at most `limit` bytes and within a sixteenth of it: the one in
        force if it is, else a thirty-second below `limit`, set on `cursor`. The limit follows
        the memory available, which moves by some megabytes between statements (a warm demand
        statement's limit fell by 10-80 MB each time), and a `SET` is one more statement
        (0.8-4.5 ms in a warm statement); the margin lets such moves keep the limit in force."""
        with self._lock:
            if self._memory_limit is not None and limit - limit // 16 <= self._memory_limit <= limit:
                return
            value = limit - limit // 32
            cursor.execute(_set("memory_limit", f"{value}b"))
            self._memory_limit = value

    def base_copy(self, cursor: Any, table: Any) -> BaseCopy:
        """The Arrow `table` as a native table of the database, made on the statement's
        `cursor`."""
        name = self._name()
        load_arrow(cursor, _main(name), table)
        return BaseCopy(self, name, table.num_rows, table.nbytes)

    def copy_of(self, cursor: Any, rows: exp.Query, width: int) -> BaseCopy:
        """The rows of the query `rows` (a read of a table's parquet files) as a native table of
        the database, made on the statement's `cursor`; `width`: a row's bytes, about."""
        name = self._name()
        cursor.execute(exp.Create(this=_main(name), kind="TABLE", expression=rows)
                       .sql("duckdb", identify=True))
        count = cursor.execute(exp.select("count(*)").from_(_main(name)).sql("duckdb")).fetchall()[0][0]
        return BaseCopy(self, name, count, count * width)

    def grown(self, cursor: Any, old: BaseCopy, rows: exp.Query, width: int) -> BaseCopy | None:
        """A copy of `old`'s rows and those of the query `rows` (the rows of files added to its
        table), made on the statement's `cursor`: `rows` a native table of its own, the copy a
        view of the union of `old`'s parts and it. Copying the 16M rows of an RMAT 2^20 table
        took 0.8 s, and a delta's join probes a union of parts as fast as one table. Past
        `MAX_PARTS` parts the union is made one table again. None where `rows` are not of
        `old`'s column types (the union would cast them)."""
        added = self.copy_of(cursor, rows, width)
        if _types(cursor, added.table()) != _types(cursor, old.table()):
            return None
        parts = (*old.pieces(), added)
        selects: list[exp.Query] = [exp.select("*").from_(p.table()) for p in parts]
        union = functools.reduce(lambda a, b: exp.union(a, b, distinct=False), selects)
        if len(parts) > MAX_PARTS:
            return self.copy_of(cursor, union, width)
        name = self._name()
        cursor.execute(exp.Create(this=_main(name), kind="VIEW", expression=union).sql("duckdb", identify=True))
        return BaseCopy(self, name, old.num_rows + added.num_rows, old.nbytes + added.nbytes, parts)

    def _name(self) -> str:
        with self._lock:
            return f"rq_base_{next(self._names)}"


def load_arrow(cursor: Any, target: exp.Table, table: Any, temporary: bool = False) -> None:
    """The Arrow `table` copied into the DuckDB table `target` (a temporary one: in the cursor's
    own schema), on the statement's `cursor`."""
    properties = own() if temporary else None
    select = exp.select("*").from_(exp.to_identifier(_ARROW_IN, quoted=True))
    cursor.register(_ARROW_IN, table)
    try:
        cursor.execute(exp.Create(this=target, kind="TABLE", properties=properties,
                                  expression=select).sql("duckdb", identify=True))
    finally:
        cursor.unregister(_ARROW_IN)


@dataclass(eq=False)
class BaseCopy:
    """A base table's rows as the native table `main.<name>` of an application's database, or
    (`parts`: a copy grown by the rows of new files, `Database.grown`) the view `main.<name>` of
    the union of those copies' tables; the table or view is dropped with the last reference to
    this record, and a part's table with the last copy holding it."""

    database: Database
    name: str
    num_rows: int
    nbytes: int  # the pulled Arrow table's: what the copy holds, about
    parts: tuple[BaseCopy, ...] = ()

    def __post_init__(self) -> None:
        kind = "VIEW" if self.parts else "TABLE"
        weakref.finalize(self, _drop, self.database.con, self.name, kind).atexit = False

    def pieces(self) -> tuple[BaseCopy, ...]:
        """The native tables the copy's rows are in."""
        return self.parts or (self,)

    def table(self) -> exp.Table:
        """The table a statement reads the copy as (`main.<name>`, not a view of the statement's
        own over it: a view is one more statement to make and is bound again with every
        statement that reads it)."""
        return _main(self.name)


_DATABASES: weakref.WeakKeyDictionary[Any, Database] = weakref.WeakKeyDictionary()
_MAKING = threading.Lock()


def of(spark: SparkSession) -> Database:
    """The database of `spark`'s application (`bases.owner`), made with its first statement on
    the driver."""
    key = bases.owner(spark)
    with _MAKING:
        database = _DATABASES.get(key)
        if database is None:
            database = _DATABASES[key] = Database()
        return database


def own() -> exp.Properties:
    """`TEMPORARY`: a table or view of the statement's own, in its cursor's temporary schema,
    which statements run side by side on the database do not share."""
    return exp.Properties(expressions=[exp.TemporaryProperty()])


def _main(name: str) -> exp.Table:
    """A table of the database's own schema, where the base copies live."""
    return exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier("main"))


def _set(option: str, value: str) -> str:
    return exp.Set(expressions=[exp.SetItem(this=exp.EQ(
        this=exp.column(option), expression=exp.Literal.string(value)))]).sql("duckdb")


def _types(cursor: Any, table: exp.Table) -> list[str]:
    """The DuckDB types of `table`'s columns, in order."""
    return [row[1] for row in cursor.execute(exp.Describe(this=table).sql("duckdb", identify=True)).fetchall()]


def _drop(con: Any, name: str, kind: str) -> None:
    import duckdb

    try:
        cursor = con.cursor()
        try:
            cursor.execute(exp.Drop(tables=[_main(name)], kind=kind, exists=True)
                           .sql("duckdb", identify=True))
        finally:
            cursor.close()
    except duckdb.Error as error:  # a closed database has nothing left to free
        log.debug("endgame: dropping the base copy %s: %s", name, error)


def _close(con: Any, spill: tempfile.TemporaryDirectory) -> None:
    import duckdb

    try:
        con.close()
    except duckdb.Error as error:
        log.debug("endgame: closing the DuckDB database: %s", error)
    spill.cleanup()
