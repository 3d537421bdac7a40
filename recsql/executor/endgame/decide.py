"""Whether the driver takes over: cheap checks on the sizes first, then the branches' forms, and
only then the one Spark job per run that sizes the relations the recursive branches read. The
decision itself (`fits_driver`) is on plain numbers, so it is testable without Spark."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from recsql.executor import bases
from recsql.executor.driver_sql import Untranslatable, check_forms
from recsql.executor.endgame.translate import branch_relations
from recsql.executor.loop import Loop
from recsql.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class RunInfo:
    """What the endgame remembers about one GroupRun."""

    disabled: bool = False
    attempts: int = 0
    not_before: int = 0  # no attempt before the Spark loop has completed this iteration
    relations: dict[tuple, tuple[str, DataFrame]] | None = None  # key -> (DuckDB name, df)
    base_rows: int | None = None
    arrow: dict[str, Any] = field(default_factory=dict)  # DuckDB name -> pulled Arrow table


def applies(run: Loop, info: RunInfo) -> bool:
    settings = run.ctx.settings
    if not settings.endgame_enabled:
        return False
    # Spark's limits and a LIMIT that ends the recursion are checked by the Spark loop
    if info.disabled or run.spark_limits.active or run.group.row_target is not None:
        return False
    states = list(run.states.values())
    delta_rows = [s.delta_rows for s in states]
    if not fits_driver(delta_rows, 0, 0, True, settings):  # before sizing the bases (a job)
        return False
    if last_iteration(run) < info.not_before:
        return False
    if not _translatable(run, info):
        return False
    base_rows = _base_rows(run, info)  # Spark jobs, but only once per run
    if base_rows is None:
        return False
    state_rows = sum(s.total_rows for s in states)
    return fits_driver(delta_rows, state_rows, base_rows, _not_growing(run), settings)


def applies_from_start(run: Loop, info: RunInfo) -> bool:
    """Whether the whole fixpoint, base step included, runs on the driver: every branch is
    translatable and the relations every branch reads fit `maxDeltaRows` (and so the driver
    budget). Then nothing of the fixpoint runs on Spark but reading those relations once."""
    settings = run.ctx.settings
    if not settings.endgame_enabled or info.disabled:
        return False
    if run.spark_limits.active or run.group.row_target is not None:
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
                check_forms(branch.select)
    except Untranslatable as reason:  # the base step runs on Spark; the tail may still move
        log.info("endgame: base step on Spark: %s", reason)
        return False
    base_rows = _base_rows(run, info)
    if base_rows is None:
        return False
    if not fits_driver([], 0, base_rows, False, settings):
        # sized again, without the base branches' relations, if the tail may move to the driver
        info.relations, info.base_rows = None, None
        return False
    return True


def fits_driver(delta_rows: list[int], state_rows: int, base_rows: int, not_growing: bool,
                settings: Settings) -> bool:
    """The decision on plain numbers: every delta within `maxDeltaRows`, state plus relations
    within `maxDriverRows`, and either the whole problem within `maxDeltaRows` (by default
    equal to `maxDriverRows`: the driver runs whatever fits it, from the start) or a delta that
    no longer grows (the tail of a larger problem)."""
    if any(d > settings.endgame_max_delta_rows for d in delta_rows):
        return False
    driver_rows = state_rows + base_rows
    if driver_rows > settings.endgame_max_driver_rows:
        return False
    return driver_rows <= settings.endgame_max_delta_rows or not_growing


def _translatable(run: Loop, info: RunInfo) -> bool:
    """Every recursive branch is made of forms the driver evaluates exactly like Spark (decided
    once per run, before any data moves to the driver)."""
    try:
        for cte in run.group.ctes:
            for branch in cte.recursive_branches:
                check_forms(branch.select)
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
            info.base_rows = sum(_rows(run, key, df) for key, (_, df) in info.relations.items())
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
    return partitioned if partitioned is not None else run.ctx.spark.table(name.sql)
