"""Base tables hash-partitioned by their join columns (and base tables pulled to the driver for
the endgame), built once and kept across statements.

A recursive branch joins its delta with a base table at every iteration, so recsql shuffles the
table once by the join columns and checkpoints it: every iteration's join is then co-partitioned.
That copy is loop-invariant beyond the statement too (HaLoop keeps such data across jobs): the
next statement over the same unchanged table joins the kept copy instead of building it again.
The same holds for the rows the driver endgame pulls (`pulled`), kept as native tables of the
application's DuckDB database (endgame/database.py): a statement that runs wholly on the driver then
starts its DuckDB fixpoint without pulling or loading them again.

"Unchanged" is what Spark itself would read: the same analyzed plan (a replaced view or a new
DataFrame is another plan), over the same input files with the same sizes and modification times,
where every leaf of its physical plan is a local file scan (or rows the plan holds). A table whose
rows come from anything else can change behind the same plan: a cache is made again after an
INSERT or a REFRESH (and `inputFiles()` does not list the files under a cache), a JDBC source
changes, files elsewhere change. A table whose plan reads a cache is identified by its rows
instead: their count and two sums of their 64-bit hashes, one scan of what Spark reads. Any other
table is never kept.

The copies are shared by every session of the Spark application (`owner`): its sessions share
one cache and block manager, and the same table read by two sessions is the same plan over the
same files. A server gives each client connection a session of its own, and a BI tool opens a
connection per query, so copies kept per session made every such query a session's first
(`benchmarks/RESULTS-driver.md`, "Copies shared by the sessions of an application"). Two sessions
whose temporary views of one name hold other rows find their plans or identities differ, and
each statement makes its own copy (the later one replacing the earlier in the slot).

Partitioned copies are kept on a local master only, where their blocks live as long as the
application; a cluster's executors can be lost between statements, taking the blocks with them
(driver copies live in this process, in the application's DuckDB database). At most
`spark.recsql.base.keep` copies stay, the least recently used leaving first.

A partitioned copy is `persist`ed in Spark's columnar in-memory store rather than
`localCheckpoint`ed: every iteration scans it, and the columnar scan reads only the columns the
branch uses (interleaved runs, sum of the iterations: CC at RMAT 2^16 1.55 s -> 1.40 s, at 2^20
22.8 s -> 21.6 s; SSSP at 2^20 unchanged). A cache entry is registered with the session, so
recsql unpersists each copy it does not keep when the statement ends (`release`), and a kept
copy when it leaves. Its lineage stays, so Spark recomputes lost blocks.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from recsql.executor.loop.protocols import Context, PartitionedBase
from recsql.planner.model import base_key
from recsql.planner.names import TableName

log = logging.getLogger(__name__)


@dataclass
class _Kept:
    value: Any  # a PartitionedBase, or the table's rows on the driver (a database.BaseCopy)
    plan: DataFrame  # what the copy was made from
    files: list[tuple[Any, ...]]


ROWS = "rows"  # an identity by row count and hash sum (not by files)

# per `owner`: the kept copies, least recently used first; the lock guards the dictionaries'
# changes, which statements of several sessions make side by side (never held over a Spark job)
_KEPT: weakref.WeakKeyDictionary[Any, OrderedDict[tuple, _Kept]] = weakref.WeakKeyDictionary()
_KEEPING = threading.Lock()


def owner(spark: SparkSession) -> Any:
    """What shares kept copies (and the driver's DuckDB database): with classic PySpark, the
    application's `SparkContext`, whose sessions share Spark's cache and block manager (a
    DataFrame of one session can be read in another); a Spark Connect session stands alone (its
    DataFrames are bound to it, and it has no `sparkContext`)."""
    try:
        return spark.sparkContext
    except PySparkException:
        return spark


def _copies(spark: SparkSession) -> OrderedDict[tuple, _Kept]:
    with _KEEPING:
        return _KEPT.setdefault(owner(spark), OrderedDict())


def partitioned(ctx: Context, table: TableName, columns: tuple[str, ...],
                build: Callable[[DataFrame, bool], PartitionedBase]) -> PartitionedBase:
    """`table` hash-partitioned by `columns` into the statement's partitions: a copy kept from an
    earlier statement if its input is unchanged, else the one `build` materializes from the
    repartitioned table, kept for later statements where that is safe. `build(plan, True)` also
    identifies the copy's rows (`PartitionedBase.identity`, as `row_identity` would the table's)
    in the job that fills it: a cached table with no kept copy to compare is then not scanned
    for its identity first."""
    plan = table_df(ctx, table).repartition(ctx.partitions, *columns)
    if not _local_master(ctx.spark):  # a cluster can lose the blocks between statements
        return build(plan, False)
    # the heavy-key watch observes a copy's top keys only when it is on; the index is the copy
    # when it is on (index.py)
    slot = ("partitioned", _scope(ctx), *base_key(table, columns), ctx.partitions,
            ctx.settings.skew_enabled, ctx.settings.index_enabled)
    return _kept(ctx, slot, table, plan, lambda p: build(p, False),
                 lambda p: (copy := build(p, True), copy.identity))


def pulled(ctx: Context, table: TableName, pull: Callable[[DataFrame], Any]) -> Any:
    """`table`'s rows on the driver (what `pull` makes of the table: for the endgame, a native
    table of the application's DuckDB database, with the number of its rows in `num_rows`): a copy
    kept from an earlier statement if the table is unchanged, else a new one, kept where that is
    safe. The copy lives in this process, so it is kept on any master."""
    return _driver_copy(ctx, table, pull)


def kept_pulled(ctx: Context, table: TableName) -> Any:
    """The kept driver copy of `table` if the table is unchanged since it was made, else None
    (nothing is pulled)."""
    return _driver_copy(ctx, table, None)


def _driver_copy(ctx: Context, table: TableName, pull: Callable[[DataFrame], Any] | None) -> Any:
    """`pulled` and `kept_pulled`: a copy found current earlier in this statement is not checked
    twice (nor its table's plan made again)."""
    slot = ("pulled", _scope(ctx), table.key)
    if slot in ctx.current:
        return ctx.current[slot]
    return _kept(ctx, slot, table, table_df(ctx, table), pull)


def table_df(ctx: Context, table: TableName) -> DataFrame:
    """`table` as Spark reads it this statement: the identity check, the kept copy's plan
    comparison and the relation the endgame pulls all read the same table."""
    return read_once(ctx.tables, ctx.spark, table)


def read_once(frames: dict[TableName, DataFrame], spark: SparkSession, table: TableName) -> DataFrame:
    """`spark.table(table)`, made once per `frames` (a statement's): every `spark.table`
    analyses the table again (a Py4J round trip of 1-5 ms)."""
    df = frames.get(table)
    if df is None:
        df = frames[table] = spark.table(table.sql)
    return df


def scope(spark: SparkSession) -> tuple[str, str]:
    """The current catalog and schema, against which a name of fewer parts resolves (`USE`)."""
    return spark.catalog.currentCatalog(), spark.catalog.currentDatabase()


def _scope(ctx: Context) -> tuple[str, str]:
    """The statement's `scope`: a copy is kept under its table's name as written within it, so
    `edges` under `USE a` and under `USE b` (two tables) take two slots, as do `edges` and
    `a.edges` (a temp view may shadow the one and not the other)."""
    if ctx.scope is None:
        ctx.scope = scope(ctx.spark)
    return ctx.scope


def _kept(ctx: Context, slot: tuple, table: TableName, plan: DataFrame,
          build: Callable[[DataFrame], Any] | None,
          identified: Callable[[DataFrame], tuple[Any, list[tuple[Any, ...]] | None]] | None = None) -> Any:
    """The copy kept in `slot` if `plan` is unchanged since it was made, else what `build`
    makes of `plan` (kept if it is safe to), or None without `build`. `identified` makes the
    copy and the identity of its rows at once: where no copy is kept to compare and the table
    is identified by its rows, the table is not scanned for them (a cold statement's copy of a
    cached table read it twice: RMAT 2^20 CC, benchmarks/FINDINGS.md)."""
    if ctx.settings.base_keep == 0:
        return None if build is None else build(plan)
    kept = _copies(ctx.spark)
    with _KEEPING:
        old = kept.get(slot)
    if old is None and identified is not None and table not in ctx.identities:
        files = _identity(ctx, table, scan=False)
        if files == [(ROWS,)]:
            value, files = identified(plan)
            ctx.identities[table] = files
            if files is not None:
                _keep(ctx, kept, slot, _Kept(value, plan, files))
            return value
    files = _identity(ctx, table)
    if old is not None and files is not None and old.files == files and _same_plan(plan, old.plan):
        log.info("recsql: %s copy of %s kept from an earlier statement", slot[0], table)
        with _KEEPING:
            if kept.get(slot) is old:
                kept.move_to_end(slot)
        if slot[0] == "pulled":  # freed only with its last reference: safe to hand out again
            ctx.current[slot] = old.value
        return old.value
    if old is not None:  # stale: freed before the new copy is made
        _leave(kept, slot, old)
    if build is None:
        return None
    value = build(plan)
    if files is not None:
        _keep(ctx, kept, slot, _Kept(value, plan, files))
    return value


def _keep(ctx: Context, kept: OrderedDict[tuple, _Kept], slot: tuple, record: _Kept) -> None:
    """`record` kept in `slot`, the least recently used copies leaving past `spark.recsql.base.keep`."""
    with _KEEPING:
        # another session's statement may have kept a copy here meanwhile: the later wins
        leaving = [kept.pop(slot)] if slot in kept else []
        kept[slot] = record
        while len(kept) > ctx.settings.base_keep:
            leaving.append(kept.popitem(last=False)[1])
    for gone in leaving:
        _release(gone.value)


def grown(ctx: Context, table: TableName, before: list[tuple[Any, ...]] | None, now: list[tuple[Any, ...]],
          grow: Callable[[Any], Any], pull: Callable[[DataFrame], Any]) -> Any:
    """The driver copy of `table`, whose files a materialized view's refresh found to be `now`
    and at the view's last refresh `before` (None: not only grown since). A copy kept of the
    table as it was then is grown by `grow` with the rows of the new files (None where it cannot
    be), not pulled again whole: at RMAT 2^20 reading the whole table took longer than the rest
    of a refresh's fixpoint (benchmarks/RESULTS-refresh.md). Else as `pulled`, `pull` making
    the copy. Either way the copy is made from `now`'s files, so they are its identity where
    Spark reads the table from its files alone (not listed again: `inputFiles()` costs a Py4J
    round trip a file, 0.4 s for RMAT 2^20's 1,618); where this statement found other files,
    the copy is made and not kept."""
    slot = ("pulled", _scope(ctx), table.key)
    if slot in ctx.current:
        return ctx.current[slot]
    plan = table_df(ctx, table)
    if table not in ctx.identities:
        ctx.identities[table] = now if plan_reads(plan) == FILES else None
    files = ctx.identities[table] if ctx.settings.base_keep else None
    if files is None or files != now:
        return pull(plan)
    kept = _copies(ctx.spark)
    with _KEEPING:
        old = kept.get(slot)
    # the kept copy holds the rows of `before`'s files (their sizes and mtimes unchanged) as
    # Spark read them, and the table now is those files and new ones under the same plan
    if (old is not None and before is not None and old.files == before and set(before) <= set(files)
            and _same_plan(plan, old.plan)):
        value = grow(old.value)
        if value is not None:
            log.info("recsql: pulled copy of %s grown by the rows of %d new file(s)", table,
                     len(files) - len(before))
            _keep(ctx, kept, slot, _Kept(value, plan, files))
            ctx.current[slot] = value
            return value
    return _kept(ctx, slot, table, plan, pull)


def _leave(kept: OrderedDict[tuple, _Kept], slot: tuple, old: _Kept) -> None:
    """`old` out of `slot` and freed, unless another statement replaced it meanwhile."""
    with _KEEPING:
        if kept.get(slot) is not old:
            return
        del kept[slot]
    _release(old.value)


def row_count(ctx: Context, table: TableName) -> int | None:
    """`table`'s rows, if this statement's identity check counted them (a cached table)."""
    found = _identity(ctx, table)
    return found[0][1] if found and found[0][0] == ROWS else None


def _identity(ctx: Context, table: TableName, scan: bool = True) -> list[tuple[Any, ...]] | None:
    """What tells `table`'s rows apart from their earlier versions (once per statement), by what
    its physical plan reads (`plan_reads`):
    - a cache anywhere in it: the row count and two sums of its rows' hashes, one scan of the
      table as Spark reads it (an INSERT or a REFRESH re-makes a cache under the same plan, and
      nothing public tells one cache entry from the next);
    - local files only (and rows the plan itself holds): its input files with sizes and mtimes
      (a stat each);
    - anything else (a JDBC source, files elsewhere, an RDD): None, never kept; also None for
      rows that cannot be hashed (a map column).
    A cached table has no cheaper sound proof in Spark's public API, and counting it in the scan
    that pulls the rows saved nothing (benchmarks/FINDINGS.md, "Identifying a cached table").
    With `scan` False, a table identified by its rows is not scanned: `[(ROWS,)]` says so, and
    nothing is recorded (the caller identifies the rows it reads anyway)."""
    if table not in ctx.identities:
        df = table_df(ctx, table)
        files, local = file_identity(df)
        # a table wholly cached lists no files; one of local files may still read a cache too
        if local:
            reads = plan_reads(df)
        else:
            reads = CACHE if ctx.spark.catalog.isCached(table.sql) else OTHER
        identity: list[tuple[Any, ...]] | None = None
        if reads == FILES:
            identity = files
        elif reads == CACHE:
            if not scan:
                return [(ROWS,)]
            identity = row_identity(df, table.sql)
        ctx.identities[table] = identity
    return ctx.identities[table]


def row_identity(df: DataFrame, label: str) -> list[tuple[Any, ...]] | None:
    """The row count, the XOR of the rows' 64-bit hashes and the sum of their low 31 bits (a
    bag's doubled row cancels in the XOR, not in the sum): one hash a row, where a second one
    (the sum of 32-bit `hash`es) made the scan a fifth slower (benchmarks/FINDINGS.md). Summed
    as BIGINT, 31-bit values cannot overflow below 2^32 rows (a DECIMAL sum doubled the scan).
    Written as SQL expressions: the same plan, built in 14 Py4J calls where `functions`' column
    objects took 167 (benchmarks/FINDINGS.md, "A warm SSSP at RMAT 2^16, fourth pass")."""
    try:
        row = hashed(df).selectExpr(*HASH_SUMS).first()
    except PySparkException as error:
        log.debug("recsql: %s cannot be identified by its rows: %s", label, error)
        return None
    return rows_identity(row.asDict()) if row is not None else None


def hashed(df: DataFrame, keep: bool = False) -> DataFrame:
    """`df`'s rows' 64-bit hashes (`HASH`), after `df`'s own columns if `keep`: what
    `HASH_SUMS` sum up. Raises where a column cannot be hashed (a map)."""
    columns = ", ".join("`" + c.replace("`", "``") + "`" for c in df.columns)
    return df.selectExpr(*(["*"] if keep else []), f"xxhash64({columns}) AS {HASH}")


def rows_identity(sums: dict) -> list[tuple[Any, ...]]:
    """The identity `row_identity` makes of `HASH_SUMS`' values."""
    return [(ROWS, sums["__rq_n"], sums["__rq_x"], sums["__rq_s"])]


HASH = "__rq_h"
HASH_SUMS = ("count(1) AS __rq_n", f"bit_xor({HASH}) AS __rq_x", f"sum({HASH} & {(1 << 31) - 1}) AS __rq_s")


CACHE, FILES, OTHER = "cache", "files", "other"
_EXPLAINING = threading.Lock()
# the leaves of a physical plan whose rows change only with their files (a file source's scan)
# or never (rows the plan holds); any other leaf may change behind the same plan
_FILE_LEAVES = ("FileScan ",)
_FIXED_LEAVES = ("LocalTableScan", "Range ", "Scan OneRowRelation")


def plan_reads(df: DataFrame) -> str:
    """What Spark's physical plan of `df` reads: a cache anywhere in it (`CACHE`), else files
    and fixed rows alone (`FILES`), else `OTHER`. By `explain()`'s text, the one public view of
    the plan with the cache in it: `inputFiles()` lists a cached part's files not at all, so a
    view of files and a cached table looked unchanged after an INSERT into the table. The text
    is printed, so it is read from `sys.stdout` while `df` explains itself (on `df`'s own plan,
    which `inputFiles()` optimized already: 20 ms, where collecting an `EXPLAIN` statement's
    row ran a job of 300 ms). Another thread's print meanwhile lands in that text too, where it
    can only make the table look less safe (a cache, or a leaf that is not a file)."""
    text = io.StringIO()
    try:
        # one at a time: two statements swapping `sys.stdout` at once could leave it swapped
        with _EXPLAINING, contextlib.redirect_stdout(text):
            df.explain()
    except PySparkException as error:
        log.debug("recsql: the plan could not be explained: %s", error)
        return OTHER
    explained = text.getvalue()
    if "InMemoryRelation" in explained or "InMemoryTableScan" in explained:
        return CACHE
    leaves = _leaves(explained)
    if leaves and all(leaf.startswith(_FILE_LEAVES + _FIXED_LEAVES) for leaf in leaves):
        return FILES
    return OTHER


def _leaves(explained: str) -> list[str]:
    """The leaf operators of `EXPLAIN`'s physical plan tree (each line an operator, its
    children the lines below it drawn deeper; whole-stage codegen's `*(n) ` prefix dropped)."""
    lines = explained.split("== Physical Plan ==", 1)[-1].strip("\n").splitlines()
    nodes = []
    for line in lines:
        depth = len(line) - len(line.lstrip(" :+-|"))
        if line[depth:].strip():
            nodes.append((depth, re.sub(r"^\*\(\d+\) ", "", line[depth:])))
    return [name for i, (depth, name) in enumerate(nodes)
            if i + 1 == len(nodes) or nodes[i + 1][0] <= depth]


def forget(spark: SparkSession) -> None:
    """Drop the copies kept for `spark`'s application (their blocks were lost), every session's."""
    with _KEEPING:
        gone: OrderedDict[tuple, _Kept] = _KEPT.pop(owner(spark), OrderedDict())
    for old in gone.values():
        _release(old.value)


def release(ctx: Context) -> None:
    """Free the statement's copies that are not kept for later statements.

    A copy made with keeping off (`spark.recsql.base.keep=0`) has the very plan of a copy kept
    from an earlier statement, so Spark caches both in one entry: freeing it would leave the
    kept copy reading an uncached plan, which repartitions the whole table at every iteration
    (RMAT 2^20 SSSP, the benchmark's kept copy after a `nothing kept` run: 33.9 s, not 12)."""
    # the statement lets go of its driver copies: one replaced meanwhile is freed now, not when
    # the garbage collector finds the statement's context
    ctx.current.clear()
    copies = _copies(ctx.spark)
    with _KEEPING:
        kept = [k.value for k in copies.values() if isinstance(k.value, PartitionedBase)]
    for partitioned in ctx.bases.values():
        if not any(partitioned is k or _same_plan(partitioned.df, k.df) for k in kept):
            _release(partitioned)


def _same_plan(a: DataFrame, b: DataFrame) -> bool:
    """Whether two plans are the same. A kept copy over a table dropped since is no match: Spark
    Connect analyses a DataFrame's plan again on every call, and the table is gone."""
    try:
        return a.sameSemantics(b)
    except PySparkException as error:
        log.debug("recsql: plans could not be compared: %s", error)
        return False


def _release(value: Any) -> None:
    """Unpersist a partitioned copy (a driver copy is freed with its last reference: a statement
    still reading it keeps it until it ends)."""
    if isinstance(value, PartitionedBase):
        try:
            value.df.unpersist()
            if value.index is not None:
                value.index.unpersist()
        except Exception as error:  # noqa: BLE001 - a stopped session has nothing left to free
            log.debug("recsql: a partitioned copy could not be unpersisted: %s", error)


def _local_master(spark: SparkSession) -> bool:
    return (spark.conf.get("spark.master", None) or "").startswith("local")


def file_identity(df: DataFrame) -> tuple[list[tuple[Any, ...]], bool]:
    """Each input file of `df` with its size and mtime where it is on the local disk; and whether
    all of them are (False when it has no input files)."""
    try:
        files = sorted(df.inputFiles())
    except Exception:  # noqa: BLE001 - a source that cannot list its inputs
        return [], False
    identity: list[tuple[Any, ...]] = []
    local = bool(files)
    for uri in files:
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            try:
                stat = os.stat(parsed.path)
                identity.append((uri, stat.st_size, stat.st_mtime_ns))
                continue
            except OSError:
                pass
        identity.append((uri,))
        local = False
    return identity, local
