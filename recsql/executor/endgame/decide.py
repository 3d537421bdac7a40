"""Whether the driver takes over: cheap checks on the sizes first, then the branches' forms, and
only then the one Spark job per run that sizes the relations the recursive branches read. The
decision itself (`fits_driver`, with `driver_budget` and `held_bytes`) is on plain numbers, so it
is testable without Spark.

The driver budget is in bytes: what the state and the relations take is estimated from their
schemas and row counts (`row_bytes`), and held against a share of the memory available to this
process when the endgame decides (`available_memory`), or `spark.recsql.endgame.driverMemory`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from recsql.executor.endgame.driver_sql import Untranslatable, check_forms
from recsql.executor.endgame.translate import branch_relations
from recsql.executor.loop.protocols import Loop
from recsql.executor.state import bases
from recsql.settings import Settings, byte_size

log = logging.getLogger(__name__)


@dataclass
class RunInfo:
    """What the endgame remembers about one GroupRun."""

    disabled: bool = False
    attempts: int = 0
    not_before: int = 0  # no attempt before the Spark loop has completed this iteration
    relations: dict[tuple, tuple[str, DataFrame]] | None = None  # key -> (DuckDB name, df)
    base_rows: int | None = None
    base_bytes: int = 0  # estimated bytes of the relations (row_bytes x rows), with base_rows
    budget: int = 0  # the driver budget in bytes, set when the relations are sized
    max_pull: int = 0  # spark.driver.maxResultSize in bytes (0: none), read with the budget
    # DuckDB name -> the relation's rows: a table's `database.BaseCopy`, else a pulled Arrow table
    pulled: dict[str, Any] = field(default_factory=dict)


def applies(run: Loop, info: RunInfo) -> bool:
    settings = run.ctx.settings
    if not settings.endgame_enabled:
        return False
    if info.disabled:
        return False
    states = list(run.states.values())
    delta_rows = [s.delta_rows for s in states]
    if not fits_driver(delta_rows, 0, 0, 1, True, settings):  # before sizing the bases (a job)
        return False
    if last_iteration(run) < info.not_before:
        return False
    if not _translatable(run, info):
        return False
    base_rows = _base_rows(run, info)  # Spark jobs, but only once per run
    if base_rows is None:
        return False
    state_rows = sum(s.total_rows for s in states)
    if not all(pull_fits(s.total_rows * row_bytes(s.schema), info.max_pull) for s in states):
        return False
    held = _estimate("the tail", state_bytes(run), info)
    return fits_driver(delta_rows, state_rows + base_rows, held, info.budget, _not_growing(run), settings)


def applies_from_start(run: Loop, info: RunInfo) -> bool:
    """Whether the whole fixpoint, base step included, runs on the driver: every branch is
    translatable and the relations every branch reads fit the driver budget (and
    `maxDeltaRows`, if set). Then nothing of the fixpoint runs on Spark but reading those
    relations once."""
    settings = run.ctx.settings
    if not settings.endgame_enabled or info.disabled:
        return False
    # a base row's sum/count contributor is identified by Spark's JSON of the row; the Spark base
    # step makes it, and the driver takes the fixpoint over after it
    if any(c.summing for c in run.group.ctes):
        return False
    if not _translatable(run, info):
        return False
    try:
        for cte in run.group.ctes:
            for branch in cte.base_branches:
                check_forms(branch.select, ())
    except Untranslatable as reason:  # the base step runs on Spark; the tail may still move
        log.info("endgame: base step on Spark: %s", reason)
        return False
    base_rows = _base_rows(run, info)
    if base_rows is None:
        return False
    if not fits_driver([], base_rows, _estimate("the whole fixpoint", 0, info), info.budget, False, settings):
        # sized again, without the base branches' relations, if the tail may move to the driver
        info.relations, info.base_rows = None, None
        return False
    return True


def fits_driver(delta_rows: list[int], driver_rows: int, held: int, budget: int,
                not_growing: bool, settings: Settings) -> bool:
    """The decision on plain numbers: the bytes the driver would hold (`held_bytes`) within its
    `budget` (`driver_budget`); and, with a `maxDeltaRows` limit, every delta within it and
    either the whole problem (`driver_rows`, state plus relations) within it or a delta that no
    longer grows (the tail of a larger problem). Without the limit (the default) whatever fits
    the budget runs on the driver, from the start."""
    if held > budget:
        return False
    limit = settings.endgame_max_delta_rows
    if not limit:
        return True
    if any(d > limit for d in delta_rows):
        return False
    return driver_rows <= limit or not_growing


# Bytes one value takes in an Arrow column (and in DuckDB's), by Spark's type name; null masks
# and offsets are within the slack of `HELD_PER_BYTE`.
FIXED_WIDTHS = {"boolean": 1, "byte": 1, "short": 2, "integer": 4, "date": 4, "float": 4,
                "long": 8, "double": 8, "timestamp": 8, "timestamp_ntz": 8, "decimal": 16}
VARIABLE_WIDTH = 32  # a string, binary or nested value: a guess (no job reads their lengths)
# What the driver process grows by per estimated byte, measured (`python -m benchmarks drivermem`;
# FINDINGS.md, "Driver memory per estimated byte": a session's first statement, the Python
# process's peak RSS growth, RMAT 2^12 to 2^20). The relations: their pulled Arrow tables (1.03x;
# a base table's is copied into the application's DuckDB database, 1.3-1.35x, and then freed) and the
# hash tables DuckDB builds over them for the joins: the statement's peak was 2.5x the relations'
# estimate (SSSP) to 2.9x (CC) from 2^16 to 2^20 (2.3x and 2.5x at 2^16 with the DuckDB copy). The
# state: DuckDB's `all`, `delta` and `new` tables, an iteration's candidates (the delta joined
# with the relations: several times the delta), the merge's hash tables, the Arrow copy written
# back to Spark: 20x (rmat-10) to 22x (rmat-12) for a transitive closure, whose candidates are
# many times its state. Each with a margin of a fifth to a quarter over the largest measured, and
# a fixed part for DuckDB's connection and its threads' buffers (16-27 MiB at the smallest sizes).
# Candidates beyond this are DuckDB's to spill (its memory limit, driver.py).
HELD_PER_BYTE = {"relations": 3.5, "state": 28.0}
HELD_FIXED = 64 << 20
# Of the memory available when the endgame decides, the share its fixpoint may take: the rest
# stays for Spark's own driver (whose JVM grows into it) and the machine's other processes.
AVAILABLE_SHARE = 0.5
UNKNOWN_AVAILABLE = 1 << 30  # bytes assumed available where the system does not say (not Linux)


def row_bytes(schema: StructType) -> int:
    return sum(FIXED_WIDTHS.get(f.dataType.typeName(), VARIABLE_WIDTH) for f in schema.fields)


def held_bytes(state: int, relations: int) -> int:
    """What the driver process grows by for `state` and `relations` estimated bytes (see
    HELD_PER_BYTE)."""
    return int(HELD_FIXED + state * HELD_PER_BYTE["state"] + relations * HELD_PER_BYTE["relations"])


def _estimate(what: str, state: int, info: RunInfo) -> int:
    """`held_bytes` for the decision, logged with its parts (what the estimate is checked by)."""
    held = held_bytes(state, info.base_bytes)
    log.info("endgame: %s on the driver would hold about %d bytes (state %d, relations %d "
             "estimated bytes) of a budget of %d", what, held, state, info.base_bytes, info.budget)
    return held


def driver_budget(setting: int, available: int | None) -> int:
    """The bytes the driver fixpoint may hold: `spark.recsql.endgame.driverMemory` when set,
    else a share of the `available` memory."""
    if setting:
        return setting
    return int((available if available is not None else UNKNOWN_AVAILABLE) * AVAILABLE_SHARE)


def available_memory() -> int | None:
    """Bytes this process may still allocate: the system's available memory (/proc/meminfo's
    MemAvailable: free memory plus what the kernel can reclaim), within a cgroup's limit if the
    process runs under one; None where neither is known."""
    found = []
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as limit, open("/sys/fs/cgroup/memory.current") as used:
            text = limit.read().strip()
            if text != "max":
                found.append(max(int(text) - int(used.read().strip()), 0))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def pull_fits(relation_bytes: int, max_result_size: int) -> bool:
    """Whether Spark lets one action bring a relation of `relation_bytes` to the driver (its
    `spark.driver.maxResultSize`, 0: no limit; the Arrow batches are about the estimate)."""
    return not max_result_size or relation_bytes <= max_result_size


def _max_result_size(run: Loop) -> int:
    try:
        return byte_size(run.ctx.spark.conf.get("spark.driver.maxResultSize", "1g") or "1g")
    except (PySparkException, ValueError):  # not readable (a Connect server's own), or odd
        return 1 << 30  # Spark's default


def state_bytes(run: Loop) -> int:
    return sum(s.total_rows * row_bytes(s.schema) for s in run.states.values())


def _translatable(run: Loop, info: RunInfo) -> bool:
    """Every recursive branch is made of forms the driver evaluates exactly like Spark (decided
    once per run, before any data moves to the driver)."""
    try:
        for cte in run.group.ctes:
            for branch in cte.recursive_branches:
                check_forms(branch.select, {r.binding for r in branch.refs})
    except Untranslatable as reason:
        log.info("endgame: staying on Spark: %s", reason)
        info.disabled = True
        return False
    return True


def last_iteration(run: Loop) -> int:
    return max((s.iteration for s in run.stats), default=0)


def _not_growing(run: Loop) -> bool:
    """The group's delta did not grow in the last Spark iteration (never true at iteration 0)."""
    per_iteration: dict[int, int] = {}
    for s in run.stats:
        per_iteration[s.iteration] = per_iteration.get(s.iteration, 0) + s.delta_rows
    last = max(per_iteration, default=0)
    if last < 1 or last - 1 not in per_iteration:
        return False
    return per_iteration[last] <= per_iteration[last - 1]


def _base_rows(run: Loop, info: RunInfo) -> int | None:
    if info.base_rows is None:
        try:
            info.relations = relations(run)
            sizes = [(_rows(run, key, df), row_bytes(df.schema)) for key, (_, df) in info.relations.items()]
            info.base_rows = sum(rows for rows, _ in sizes)
            info.base_bytes = sum(rows * width for rows, width in sizes)
            info.budget = driver_budget(run.ctx.settings.endgame_driver_memory, available_memory())
            info.max_pull = _max_result_size(run)
            largest = max((rows * width for rows, width in sizes), default=0)
            if not pull_fits(largest, info.max_pull):
                log.info("endgame: staying on Spark: a relation of about %d bytes exceeds "
                         "spark.driver.maxResultSize", largest)
                info.disabled = True
                return None
        except (Untranslatable, PySparkException) as error:
            # a relation the driver cannot be given (an unbound reference, a table-valued
            # function), or one Spark cannot size: unresolvable (AnalysisException) or failing
            # as it runs (a division by zero in a view the branch reads). The endgame does not
            # apply; the Spark loop evaluates the relation itself and reports Spark's error as
            # recsql's, naming the CTE and the iteration. Anything else surfaces.
            log.debug("endgame: cannot size the relations: %s", error)
            info.disabled = True
            return None
    return info.base_rows


def _rows(run: Loop, key: tuple, df: DataFrame) -> int:
    """A relation's rows: known from its driver copy kept by an earlier statement
    (`bases.pulled`) or from the check for one, else counted by Spark."""
    kind, name = key
    if kind != "table":
        return df.count()
    kept = bases.kept_pulled(run.ctx, name)
    if kept is not None:
        return kept.num_rows
    counted = bases.row_count(run.ctx, name)  # by the check that found no kept copy
    return counted if counted is not None else df.count()


def relations(run: Loop) -> dict[tuple, tuple[str, DataFrame]]:
    """Every relation (other than the group's own CTEs) a branch reads, by a key that identifies
    it across branches, with the DuckDB table name it gets and its DataFrame. The base branches'
    relations are included while the whole fixpoint may still run on the driver (the base step
    has not run), so they are counted and pulled with the rest, once."""
    found: dict[tuple, tuple[str, DataFrame]] = {}
    base_step_ran = bool(run.stats)
    for cte in run.group.ctes:
        branches = cte.recursive_branches if base_step_ran else [*cte.base_branches, *cte.recursive_branches]
        for branch in branches:
            for key, _table in branch_relations(run.ctx.env, branch):
                if key not in found:
                    found[key] = (f"rq_rel_{len(found)}", _relation_df(run, key))
    return found


def _relation_df(run: Loop, key: tuple) -> DataFrame:
    kind, name = key
    if kind == "env":
        return run.ctx.env[name]
    # The driver needs the rows, not Spark's placement: a copy the Spark loop already
    # pre-partitioned and cached reads fastest; pre-partitioning one it never joined would
    # cost a shuffle and a cache for nothing.
    partitioned = next((b.df for (table, _), b in run.ctx.bases.items() if table == name.key), None)
    return partitioned if partitioned is not None else bases.table_df(run.ctx, name)
