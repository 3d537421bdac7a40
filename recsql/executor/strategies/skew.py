"""Spatial balance: split heavy join keys of a delta's join with a base table (Kumar & Gilray,
bucket refinement and consolidation).

A delta joins a pre-partitioned base table on key K; the join runs in the partition hash(K)
picks, so a key holding a large share of the delta's (or the base table's) rows puts that share of
the join's work on one partition. A key is *heavy* when its rows exceed `skew.threshold` times
the rows per partition (and `skew.minRows`). For the heavy keys of one iteration the branch is run
as up to three parts over disjoint key sets, unioned:

* light keys: the join exactly as without balancing (the delta moves as the vote decided);
* keys heavy in the delta: the delta's rows stay where the state put them (hashed by the whole
  group key, of which K is a strict part, so one key's rows are already spread over every
  partition: those are its sub-buckets), and the base rows of those keys are replicated to every
  sub-bucket (a broadcast of only those rows);
* keys heavy in the base table: their base rows are re-placed once by a hash of all their columns
  (the sub-buckets), and the delta rows of those keys are replicated to them (broadcast).

A key goes to whichever heavy part replicates fewer rows. Keys are re-chosen every iteration from
what the iteration's one action observed (`approx_top_k` of the next delta's join keys, and the
delta rows of the base table's heavy keys), so a key whose skew has passed is joined in place
again with nothing to move back: consolidation is free. With no heavy key the branch's plan is
exactly the unbalanced one.

Each iteration also observes how the join output (the candidates) spreads over the tasks that
produced it: `balance` is the largest task's rows over the rows per partition (1.0 is even).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, reduce

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DayTimeIntervalType,
    MapType,
    StructType,
    YearMonthIntervalType,
)

from recsql.executor.loop.protocols import Loop
from recsql.executor.state.relations import RelationState
from recsql.executor.strategies import joinside
from recsql.executor.strategies.lookup import SKETCH_ITEMS, field_named, key_filter, top_k
from recsql.planner.model import DELTA, BaseKey, BaseRelation, Branch, CTEPlan, Ref
from recsql.settings import Settings

PID = "__rq_pid"


@dataclass(frozen=True)
class Join:
    """A recursive reference's equi-join with a pre-partitioned base table on its columns."""

    ref: Ref
    base: BaseRelation
    ref_columns: tuple[str, ...]  # the reference's join columns, in the order of base.columns
    spread: bool  # the join key is a strict part of the reference's partition key

    @property
    def base_key(self) -> BaseKey:
        return self.base.key


def branch_joins(branch: Branch, ctes: dict[str, CTEPlan]) -> list[Join]:
    """The (reference, base table) equi-joins of a recursive branch on the base's partition
    columns, as the planner recorded them."""
    joins = []
    for ref in branch.refs:
        for base in branch.bases:
            found = base.join_of(ref.binding)
            if found is None:
                continue
            target = ctes[ref.cte]
            key = {c.lower() for c in target.partition_key}
            # a bag's delta is not placed by its key, so one key's rows are not known to be spread
            spread = not target.bag and {c.lower() for c in found.columns} < key
            joins.append(Join(ref, base, found.columns, spread))
    return joins


def sketchable(schema: StructType, columns: tuple[str, ...]) -> bool:
    """Whether approx_top_k can count the key: one column of an atomic type (it refuses structs,
    so a key of several columns is never found heavy, and its joins are never split)."""
    refused = (BinaryType, ArrayType, MapType, StructType, DayTimeIntervalType, YearMonthIntervalType)
    return len(columns) == 1 and not isinstance(field_named(schema, columns[0]).dataType, refused)


def as_keys(items) -> dict[tuple, int]:
    """approx_top_k's [(item, count)] as {key tuple: count}, without null keys (they never join)."""
    return {(row["item"],): int(row["count"]) for row in items or [] if row["item"] is not None}


def heavy(counts: dict[tuple, int], total: int, partitions: int, threshold: float,
          min_rows: int) -> dict[tuple, int]:
    """The keys whose rows exceed `threshold` x rows per partition and `min_rows`.

    >>> heavy({(1,): 900, (2,): 60, (3,): 40}, total=1000, partitions=4, threshold=0.5, min_rows=1)
    {(1,): 900}
    """
    bar = max(threshold * total / partitions, min_rows)
    return {k: c for k, c in counts.items() if c >= bar}


def base_metrics(schema: StructType, columns: tuple[str, ...], settings: Settings) -> list[Column]:
    """What the base table's one pre-partitioning action also observes: its most frequent keys."""
    if not settings.skew_enabled or not sketchable(schema, columns):
        return []
    return [top_k(F.col(columns[0]), settings.skew_max_keys).alias("skew_top")]


class Balancer:
    """Per recursive group: heavy keys seen by the last action, the split branches, and the
    iteration's balance."""

    def __init__(self, run: Loop) -> None:
        self.run = run
        self.settings = run.ctx.settings
        self.partitions = run.ctx.partitions
        ctes = {c.key: c for c in run.group.ctes}
        self.joins = {(c.key, b.index): branch_joins(b, ctes) if b.splittable else []
                      for c in run.group.ctes for b in c.recursive_branches}
        self.delta_top: dict[tuple, dict[tuple, int]] = {}  # (cte, columns) -> heavy candidates
        self.delta_hits: dict[Join, dict[tuple, int]] = {}  # delta rows of each base-heavy key
        self.spread_bases: dict[tuple, DataFrame] = {}
        self.split: dict[str, int] = {}  # cte -> keys split this iteration
        self.watches: dict[str, Observation] = {}
        self.metric_columns: dict[tuple[str, int], list[Column]] = {}

    @property
    def enabled(self) -> bool:
        return self.settings.skew_enabled

    # -- what the iteration's action observes -------------------------------------------

    def reading(self, cte: str) -> list[Join]:
        """The joins that read `cte`'s delta."""
        return [j for joins in self.joins.values() for j in joins if j.ref.cte == cte]

    def top_columns(self, cte: str) -> list[tuple[str, ...]]:
        schema = self.run.states[cte].schema
        return sorted({j.ref_columns for j in self.reading(cte) if j.spread and sketchable(schema, j.ref_columns)})

    def base_heavy(self, join: Join) -> dict[tuple, int]:
        known = self.run.ctx.bases.get(join.base_key)
        if known is None or not known.top_keys or known.rows is None:
            return {}
        return heavy(known.top_keys, known.rows, self.partitions, self.settings.skew_threshold,
                     self.settings.skew_min_rows)

    def metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        """Added to the iteration's one observation of `cte`'s merged state: the next delta's
        most frequent join keys, and its rows of each base table's heavy keys."""
        if not self.enabled:
            return []
        # Built once per run (each Column node is a Py4J round trip), and again if a base table
        # was first pre-partitioned (so its heavy keys became known) since.
        key = (cte.key, sum(bool(b.top_keys) for b in self.run.ctx.bases.values()))
        if key not in self.metric_columns:
            self.metric_columns[key] = self.build_metrics(cte, state)
        return self.metric_columns[key]

    def build_metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        flag = state.delta_flag()
        out = [top_k(F.when(flag, F.col(cols[0])), self.settings.skew_max_keys + 1)
               .alias(f"skew_top_{i}") for i, cols in enumerate(self.top_columns(cte.key))]
        for i, join in enumerate(self.reading(cte.key)):
            for n, key in enumerate(self.base_heavy(join)):
                out.append(F.count_if(flag & key_filter(join.ref_columns, [key]))
                           .alias(f"skew_hit_{i}_{n}"))
        return out

    def observed(self, cte: CTEPlan, metrics: dict, reported: bool) -> None:
        if not reported:  # Spark Connect: the candidates' observation never reports
            self.watches.pop(cte.key, None)
        if not self.enabled:
            return
        for i, cols in enumerate(self.top_columns(cte.key)):
            self.delta_top[(cte.key, cols)] = as_keys(metrics.get(f"skew_top_{i}"))
        for i, join in enumerate(self.reading(cte.key)):
            self.delta_hits[join] = {
                key: metrics.get(f"skew_hit_{i}_{n}", 0) for n, key in enumerate(self.base_heavy(join))
            }

    # -- splitting a branch -----------------------------------------------------------------

    def choose(self, join: Join, delta_rows: int) -> tuple[dict, dict]:
        """(keys whose base rows are replicated, keys whose delta rows are replicated)."""
        s = self.settings
        known = self.run.ctx.bases.get(join.base_key)
        base_known = known.top_keys if known is not None else {}
        floor = min(base_known.values()) if len(base_known) >= s.skew_max_keys else 0
        replicate_base, replicate_delta = {}, {}
        if join.spread:
            tops = self.delta_top.get((join.ref.cte, join.ref_columns), {})
            for key in heavy(tops, delta_rows, self.partitions, s.skew_threshold, s.skew_min_rows):
                replicate_base[key] = base_known.get(key, floor)
        base_heavy = self.base_heavy(join)
        for key, d in self.delta_hits.get(join, {}).items():
            if d and (key not in replicate_base or d <= base_heavy[key]):
                replicate_base.pop(key, None)
                replicate_delta[key] = d
        return _within(replicate_base, s.broadcast_rows), _within(replicate_delta, s.broadcast_rows)

    def branch_df(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...],
                  refs: dict[str, DataFrame], strategy: str) -> DataFrame | None:
        """The branch's output with its heavy keys split, or None to run it as it is."""
        if not self.enabled or strategy == joinside.BROADCAST_BASE:
            return None
        deltas = [r for r, role in zip(branch.refs, variant) if role == DELTA]
        join = next((j for j in self.joins[(cte.key, branch.index)] if j.ref in deltas), None)
        if join is None:
            return None
        state = self.run.states[join.ref.cte]
        by_base, by_delta = self.choose(join, state.delta_rows)
        if not by_base and not by_delta:
            return None
        base = self.run.base(cte, join.base.table, join.base.columns)
        cols = join.base.columns
        split = [*by_base, *by_delta]
        parts = [self.part(cte, branch, refs, join,
                           refs[join.ref.binding].filter(~key_filter(join.ref_columns, split)),
                           base.filter(~key_filter(cols, split)))]
        if by_base:
            parts.append(self.part(cte, branch, refs, join,
                                   state.delta.filter(key_filter(join.ref_columns, by_base)),
                                   base.filter(key_filter(cols, by_base)).hint("broadcast")))
        if by_delta:
            parts.append(self.part(cte, branch, refs, join,
                                   state.delta.filter(key_filter(join.ref_columns, by_delta))
                                   .hint("broadcast"),
                                   self.spread_base(join, base).filter(key_filter(cols, by_delta))))
        self.split[cte.key] = self.split.get(cte.key, 0) + len(split)
        return reduce(DataFrame.union, parts)

    def part(self, cte, branch, refs, join: Join, delta: DataFrame, base: DataFrame) -> DataFrame:
        return self.run.branch_df(cte, branch, {**refs, join.ref.binding: delta},
                                  bases={join.base.binding: base})

    def spread_base(self, join: Join, base: DataFrame) -> DataFrame:
        """The base rows of the base table's heavy keys, hashed by all their columns (their
        sub-buckets), computed once per run."""
        if join.base_key not in self.spread_bases:
            rows = base.filter(key_filter(join.base.columns, list(self.base_heavy(join))))
            self.spread_bases[join.base_key] = rows.repartition(
                self.partitions, *rows.columns).localCheckpoint(eager=True)
        return self.spread_bases[join.base_key]

    # -- the iteration's balance --------------------------------------------------------

    def watch(self, cte: CTEPlan, candidates: DataFrame, iteration: int) -> DataFrame:
        """Observe how many candidate rows each task of the join produced (same action); only
        with balancing on: the sketch over every candidate row is not free."""
        self.watches.pop(cte.key, None)
        if iteration == 0 or not self.enabled:
            return candidates
        observation = Observation(f"recsql_balance_{cte.key}_{iteration}_{id(self)}")
        self.watches[cte.key] = observation
        pid, tasks = self.task_columns
        return candidates.withColumn(PID, pid).observe(observation, tasks).drop(PID)

    @cached_property
    def task_columns(self) -> tuple[Column, Column]:
        """Built once per run: every Column node costs a Py4J round trip."""
        return F.spark_partition_id(), top_k(F.col(PID), SKETCH_ITEMS).alias("tasks")

    def report(self, cte: CTEPlan) -> dict:
        """The iteration's keys split and balance (None where nothing was observed); resets."""
        split = self.split.pop(cte.key, 0)
        observation = self.watches.pop(cte.key, None)
        tasks = observation.get.get("tasks") if observation is not None else None
        return {"split_keys": split,
                "balance": balance(as_keys(tasks), self.partitions) if tasks else None}


def balance(task_rows: dict[tuple, int], partitions: int) -> float | None:
    """The largest task's rows over the rows per partition (1.0: perfectly even).

    >>> balance({(0,): 10, (1,): 30}, 4)
    3.0
    """
    total = sum(task_rows.values())
    return round(max(task_rows.values()) * partitions / total, 3) if total else None


def _within(keys: dict[tuple, int], broadcast_rows: int) -> dict[tuple, int]:
    """The keys, lightest replicated side first, whose replicated rows fit `broadcast_rows`."""
    kept, rows = {}, 0
    for key, n in sorted(keys.items(), key=lambda kv: kv[1]):
        if rows + n > broadcast_rows:
            break
        kept[key], rows = n, rows + n
    return kept
