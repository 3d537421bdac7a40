"""Temporal balance: iteration roll-over (Kumar & Gilray, ISC 2020, section 3.3).

One iteration's join output can explode (the bowtie: ~W rows per iteration, then W^2 at once).
Before an iteration recsql estimates each CTE's join output; when the largest estimate exceeds
`spark.recsql.rollover.maxRows`, the previous delta is cut into n = ceil(estimate / budget)
slices by `pmod(xxhash64(group key), n)`, and each slice's candidates are merged into the state
and checkpointed before the next slice runs (one action per slice), so no single output is
expected to exceed the budget. The next delta is exactly the one the iteration would have
produced in one piece.

The estimate. For a delta rule whose delta joins a pre-partitioned base table on columns c, the
output is the sum over delta rows of the base degree deg(c). The base side is fixed: its
`HEAVY_KEYS` largest degrees are kept exactly (keyed by xxhash64 of the join key), every other
key is bounded by the largest degree left out, so the estimate never undershoots (one small job
per base, run once, and only when `delta rows x base rows` first exceeds the budget). The delta
side rides on the iteration's one action: the merge pass also observes
`sum(deg(c))` over the rows it flags as the next delta. A rule without such a base join (a join of
two recursive relations, a plain projection) is estimated by its delta's rows, a lower bound.

Correctness. Every slice binds the same iteration-start `all` and delta (DataFrames are
immutable), and only the first delta reference of each rule is sliced, so the union of the
slices' candidates is the one-piece candidates. Merging them one after the other gives the same
state for every kind: set union, min/max, the latest value of a contributor (a contributor is
identified by the group key of the delta row it comes from, so it comes from one slice), bag
concatenation. The next delta:
* set and bag states: the union of the slices' deltas (a row new in slice s is not new in a
  later slice, so they are disjoint);
* min/max and sum/count states: a group may change in slice 1 and not again in slice 2, yet it
  must be in the next delta with its final value. After the last slice, one more action takes
  the groups of the final state whose key is in any slice's delta (a left semi join) as the next
  delta, and observes its sizes and estimates. (ORing the earlier slices' keys into each merge's
  changed flag would save that action, but an outer join makes Spark's size estimate the product
  of its sides, and the checkpoints keep that estimate: it squares with every slice, and after a
  few dozen slices planning alone takes minutes.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import reduce
from itertools import count

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from recsql.executor.loop.action import aggregate, checkpoint_merge
from recsql.executor.loop.protocols import Loop
from recsql.executor.loop.spark_sql import describe_jobs
from recsql.executor.loop.stats import IterationStats
from recsql.executor.state.relations import (
    PARTITION,
    BagState,
    RelationState,
    SetState,
    with_partition,
)
from recsql.executor.strategies import joinside
from recsql.planner.model import DELTA, BaseKey, BaseRelation, Branch, CTEPlan

HEAVY_KEYS = 1000  # base join keys whose degree is kept exactly
MAX_SLICES = 256  # more actions than this per iteration cost more than they save
_names = count()


@dataclass(frozen=True)
class Probe:
    """How one delta rule's output is estimated: the rows of state `state`'s delta, times the
    degree of their `columns` in the base table `base` (None: the delta's rows)."""

    state: str
    columns: tuple[str, ...] = ()
    base: BaseRelation | None = None

    @property
    def metric(self) -> str:
        return "rollover_" + "_".join([self.state, *self.columns, *(self.base.key[1] if self.base else ())])


@dataclass
class Degrees:
    """A base table's join-key degrees: exact for the heaviest keys, bounded for the rest."""

    heavy: dict[int, int]  # xxhash64 of the key -> degree
    light: int  # no other key has a larger degree
    types: list  # the base join columns' types (delta columns are cast to them before hashing)

    exprs: dict[tuple[str, ...], Column] = field(default_factory=dict)

    def expr(self, columns: tuple[str, ...]) -> Column:
        """deg(columns), built once: the map literal is thousands of Column nodes, each a Py4J
        round trip, and it rides on every iteration's action."""
        if columns not in self.exprs:
            key = F.xxhash64(*[F.col(c).cast(t) for c, t in zip(columns, self.types)])
            if not self.heavy:
                self.exprs[columns] = F.lit(self.light)
            else:
                table = F.create_map(*[F.lit(v) for h, d in self.heavy.items() for v in (h, d)])
                self.exprs[columns] = F.coalesce(F.try_element_at(table, key), F.lit(self.light))
        return self.exprs[columns]


@dataclass
class RunInfo:
    """What roll-over remembers about one run (kept on the run object)."""

    budget: int
    probes: dict[tuple[str, int, int], Probe] = field(default_factory=dict)
    degrees: dict[BaseKey, Degrees] = field(default_factory=dict)
    # metric -> (the delta it was observed for, estimate); valid only for that very delta
    observed: dict[str, tuple[DataFrame, int]] = field(default_factory=dict)
    outputs: dict[str, Observation] = field(default_factory=dict)  # cte -> candidate counter
    count_rows: Column | None = None


class Slices:
    """The runner that cuts an iteration whose join output would explode into slices (see
    `fixpoint.GroupRun.runners`), and the hooks by which it watches the iterations run whole."""

    def __init__(self, run: Loop) -> None:
        self.loop = run
        self.info = RunInfo(run.ctx.settings.rollover_max_rows)
        for cte in run.group.ctes:
            for branch in cte.recursive_branches:
                for k, variant in enumerate(branch.variants):
                    self.info.probes[(cte.key, branch.index, k)] = _probe(run, branch, variant)

    def run(self, iteration: int) -> int | None:
        """Run the next iteration in slices; None when it needs none (the run is untouched)."""
        return iteration + 1 if step(self.loop, self.info, iteration + 1) else None

    # -- riding on the whole iterations (loop.Rider): the output counted, the estimates kept

    def watch(self, cte: CTEPlan, candidates: DataFrame, iteration: int) -> DataFrame:
        return watch(self.loop, self.info, cte, candidates)

    def metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        return metrics(self.loop, self.info, cte)

    def observed(self, cte: CTEPlan, metrics: dict, reported: bool) -> None:
        record(self.loop, self.info, cte, metrics)

    def report(self, cte: CTEPlan) -> dict:
        return {"output_rows": output_rows(self.loop, self.info, cte)}


# -- hooks of GroupRun.step (the one-piece iteration) ----------------------------------------


def watch(run: Loop, ro: RunInfo, cte: CTEPlan, candidates: DataFrame) -> DataFrame:
    """Count the candidates (the join output) in the iteration's action, while roll-over is on.
    Off (the default), nothing is watched: a second observation in the action cost a tenth of
    the run (SSSP at RMAT 2^16 on the Spark loop, interleaved runs: median 5.45 s -> 4.91 s)."""
    if ro.budget == 0:
        return candidates
    observation = Observation(f"recsql_output_{cte.key}_{next(_names)}_{id(run)}")
    ro.outputs[cte.key] = observation
    if ro.count_rows is None:  # built once: every Column node costs a Py4J round trip
        ro.count_rows = F.count(F.lit(1)).alias("rows")
    return candidates.observe(observation, ro.count_rows)


def metrics(run: Loop, ro: RunInfo, cte: CTEPlan, flag: Column | None = None) -> list[Column]:
    """The delta-side estimates that ride on the merge of `cte`'s state: for each rule reading
    its delta against a base whose degrees are known, the sum of the degrees over the rows
    `flag` marks (default: the state's next delta)."""
    probes = [(p, ro.degrees[p.base.key]) for p in ro.probes.values()
              if p.state == cte.key and p.base is not None and p.base.key in ro.degrees]
    if not probes:
        return []
    flag = run.states[cte.key].delta_flag() if flag is None else flag
    found = {}
    for probe, degrees in probes:
        if probe.metric not in found:
            degree = degrees.expr(probe.columns)
            found[probe.metric] = F.sum(F.when(flag, degree)).alias(probe.metric)
    return list(found.values())


def record(run: Loop, ro: RunInfo, cte: CTEPlan, observed: dict) -> None:
    """Keep the estimates just observed, valid for the state's new delta."""
    state = run.states[cte.key]
    for name, value in observed.items():
        if name.startswith("rollover_"):
            ro.observed[name] = (state.delta, int(value or 0))


def output_rows(run: Loop, ro: RunInfo, cte: CTEPlan) -> int | None:
    """Rows of the candidates of `cte`'s last action (None on Spark Connect)."""
    observation = ro.outputs.pop(cte.key, None)
    if observation is None:
        return None
    rows = observation.get.get("rows")
    return None if rows is None else int(rows)


# -- the decision ----------------------------------------------------------------------------


def slices(run: Loop, ro: RunInfo) -> int:
    """How many slices this iteration needs (1: no roll-over)."""
    if ro.budget <= 0 or any(b.aggregating for c in run.group.ctes for b in c.recursive_branches):
        return 1  # a term aggregating each step's rows must see the whole delta at once
    estimates = []
    for cte in run.group.ctes:
        estimate = 0
        for branch in cte.recursive_branches:
            for k, variant in enumerate(branch.variants):
                if all(run.states[r.cte].delta_rows for r, role in zip(branch.refs, variant)
                       if role == DELTA):
                    estimate += _estimate(run, ro, ro.probes[(cte.key, branch.index, k)])
        estimates.append(estimate)
    return slice_count(estimates, ro.budget, max(s.delta_rows for s in run.states.values()))


def slice_count(estimates: list[int], budget: int, largest_delta: int) -> int:
    """The decision on plain numbers: enough slices that each CTE's estimated join output fits
    the budget, at most `MAX_SLICES` and never more slices than delta rows."""
    needed = max((math.ceil(e / budget) for e in estimates), default=1)
    return max(1, min(needed, MAX_SLICES, largest_delta))


def _estimate(run: Loop, ro: RunInfo, probe: Probe) -> int:
    state = run.states[probe.state]
    if probe.base is None:
        return state.delta_rows
    key, columns = probe.base.key, probe.base.columns
    base = run.base(run.group.ctes[0], probe.base.table, columns)  # partitioned once; observes its sizes
    bound = _largest_degree(run, key)
    if key not in ro.degrees and bound is not None and state.delta_rows * bound <= ro.budget:
        return state.delta_rows * bound  # cannot exceed the budget: no statistics needed
    seen = ro.observed.get(probe.metric)
    if seen is not None and seen[0] is state.delta:
        return seen[1]
    # First time over the crude bound (or a delta not produced by a merge: resume, recovery):
    # the base's degrees once, then this delta's estimate directly; later ones ride on actions.
    if key not in ro.degrees:
        ro.degrees[key] = _degrees(base, columns)
    degree = ro.degrees[key].expr(probe.columns)
    value = aggregate(state.delta, [F.sum(degree).alias("rows")])["rows"]
    ro.observed[probe.metric] = (state.delta, int(value or 0))
    return int(value or 0)


def _largest_degree(run: Loop, base: BaseKey) -> int | None:
    """A bound on any key's base rows without a job: the most frequent key's count when the
    pre-partitioning action observed the base's top keys (skew.py's sketch, approximate), else
    the base's rows."""
    known = run.ctx.bases.get(base)
    if known is None:
        return None
    return max(known.top_keys.values()) if known.top_keys else known.rows


def _degrees(base: DataFrame, columns: tuple[str, ...]) -> Degrees:
    counts = base.dropna(subset=list(columns)).groupBy(*columns).count()
    top = (counts.select(F.xxhash64(*columns).alias("h"), F.col("count").alias("d"))
           .orderBy(F.desc("d")).limit(HEAVY_KEYS + 1).collect())
    heavy: dict[int, int] = {}
    for row in top[:HEAVY_KEYS]:
        heavy[row.h] = heavy.get(row.h, 0) + row.d  # a hash collision only overestimates
    light = top[HEAVY_KEYS].d if len(top) > HEAVY_KEYS else 0
    return Degrees(heavy, light, [f.dataType for f in base.select(*columns).schema.fields])


def _probe(run: Loop, branch: Branch, variant: tuple[str, ...]) -> Probe:
    """The rule's sliced (first delta) reference and the base it joins on its group key."""
    ref = branch.refs[variant.index(DELTA)]
    for base in branch.bases:
        join = base.join_of(ref.binding)
        if join is not None:
            return Probe(ref.cte, join.columns, base)
    return Probe(ref.cte)


# -- the rolled-over iteration ---------------------------------------------------------------


def step(run: Loop, ro: RunInfo, iteration: int) -> bool:
    """Run `iteration` in slices when its estimate exceeds the budget; False when it does not
    (then Loop.step runs it in one piece)."""
    if run.doubling_round(iteration):
        # Slices run the linear rules; the doubling rounds rely on the whole-relation round
        # before them, which a sliced linear round would skip.
        return False
    n = slices(run, ro)
    if n <= 1:
        return False
    started = time.perf_counter()
    rules = _bind(run)  # from the iteration-start states, shared by every slice
    slice_deltas: dict[str, list[tuple[DataFrame, dict]]] = {c.key: [] for c in run.group.ctes}
    largest: dict[str, int | None] = {c.key: None for c in run.group.ctes}
    for s in range(n):
        for cte in run.group.ctes:
            parts = [_slice_output(run, cte, rule, s, n) for rule in rules if rule[0] is cte]
            if not parts:
                continue
            rows, observed = _merge_slice(run, ro, cte, reduce(DataFrame.unionByName, parts), iteration, s, n)
            state = run.states[cte.key]
            slice_deltas[cte.key].append((state.delta, observed))
            if rows is not None:
                largest[cte.key] = max(rows, largest[cte.key] or 0)
    strategies = {c.key: "+".join(sorted({r[3] for r in rules if r[0] is c})) or "-"
                  for c in run.group.ctes}
    for cte in run.group.ctes:
        state = run.states[cte.key]
        if not slice_deltas[cte.key]:
            state.no_change()
        elif _disjoint(state):
            _union_deltas(run, ro, cte, state, slice_deltas[cte.key])
        else:
            _final_delta(run, ro, cte, iteration, [d for d, _ in slice_deltas[cte.key]])
        _report(run, cte, iteration, started, strategies[cte.key], n, largest[cte.key])
        started = time.perf_counter()
    return True


def _bind(run: Loop) -> list[tuple]:
    """(cte, branch, refs, strategy, sliced binding, sliced state) of every rule that runs."""
    rules = []
    for cte in run.group.ctes:
        for branch in cte.recursive_branches:
            for variant in branch.variants:
                refs, strategy = run.bind_variant(cte, branch, variant)
                if refs is not None:
                    ref = branch.refs[variant.index(DELTA)]
                    rules.append((cte, branch, refs, strategy, ref.binding, run.states[ref.cte]))
    return rules


def _slice_output(run: Loop, cte: CTEPlan, rule: tuple, s: int, n: int) -> DataFrame:
    _, branch, refs, strategy, binding, state = rule
    # xxhash64, not Spark's partitioning hash (murmur3): with n and the partition count sharing
    # a factor, a murmur3 slice would sit on a fraction of the partitions (and of the cores).
    key = state.key or state.columns
    sliced = refs[binding].filter(F.pmod(F.xxhash64(*key), F.lit(n)) == F.lit(s))
    df = run.branch_df(cte, branch, {**refs, binding: sliced}, strategy == joinside.BROADCAST_BASE)
    return run.shape(cte, branch, df)


def _disjoint(state: RelationState) -> bool:
    """Set and bag states: a row is in the delta of one slice only."""
    return isinstance(state, (SetState, BagState))


def _merge_slice(run: Loop, ro: RunInfo, cte: CTEPlan, candidates: DataFrame, iteration: int, s: int,
                 n: int) -> tuple[int | None, dict]:
    """Merge one slice's candidates into the state, in one action; (output rows, metrics)."""
    state = run.states[cte.key]
    describe_jobs(run.ctx.spark, f"recsql: {cte.name} iteration {iteration} slice {s + 1}/{n}")
    merged = state.merge(watch(run, ro, cte, candidates))
    estimates = metrics(run, ro, cte)
    observed, _ = checkpoint_merge(run, cte, state, merged, iteration, watched=estimates,
                                   by_partition=run.vote_uses_sizes(cte))
    record(run, ro, cte, observed)
    return output_rows(run, ro, cte), observed


def _final_delta(run: Loop, ro: RunInfo, cte: CTEPlan, iteration: int, deltas: list[DataFrame]) -> None:
    """min/max and sum/count states: the next delta is every group some slice changed, with its
    final value (one action: checkpoint it and observe its sizes and estimates)."""
    state = run.states[cte.key]
    key = state.key
    changed = reduce(DataFrame.unionByName,
                     [d.select(*[F.col(k).alias(f"__rq_k{i}") for i, k in enumerate(key)]) for d in deltas])
    condition = F.lit(True)
    for i, k in enumerate(key):
        condition = condition & F.col(k).eqNullSafe(F.col(f"__rq_k{i}"))
    delta = state.all.join(changed, condition, "left_semi")
    sizes = [F.count(F.lit(1)).alias("delta_rows"),
             *[F.count_if(F.col(PARTITION) == k).alias(f"delta_p{k}")
               for k in range(state.partitions)],
             *metrics(run, ro, cte, F.lit(True))]
    observation = Observation(f"recsql_{cte.key}_{iteration}_delta_{id(run)}")
    describe_jobs(run.ctx.spark, f"recsql: {cte.name} iteration {iteration} delta")
    observed_delta = with_partition(delta).observe(observation, *sizes).drop(PARTITION)
    checkpointed = run.materialize(cte, observed_delta, iteration)
    observed = observation.get
    if "delta_rows" not in observed:  # Spark Connect
        observed = aggregate(with_partition(checkpointed), sizes)
    state.replace_delta(checkpointed, observed)
    record(run, ro, cte, observed)


def _union_deltas(run: Loop, ro: RunInfo, cte: CTEPlan, state: RelationState,
                  deltas: list[tuple[DataFrame, dict]]) -> None:
    """Set and bag states: the next delta is every slice's delta (no job)."""
    sizes = {name: sum(m.get(name, 0) for _, m in deltas)
             for name in ["delta_rows", *[f"delta_p{k}" for k in range(state.partitions)]]}
    state.replace_delta(reduce(DataFrame.unionByName, [d for d, _ in deltas]), sizes)
    names = {name for _, m in deltas for name in m if name.startswith("rollover_")}
    for name in names:
        ro.observed[name] = (state.delta, sum(int(m.get(name) or 0) for _, m in deltas))


def _report(run: Loop, cte: CTEPlan, iteration: int, started: float, strategy: str,
            n: int, largest: int | None) -> None:

    state = run.states[cte.key]
    stats = IterationStats(
        cte=cte.name, iteration=iteration, delta_rows=state.delta_rows,
        total_rows=state.total_rows, seconds=time.perf_counter() - started,
        join_strategy=strategy, slices=n, output_rows=largest,
    )
    run.stats.append(stats)
    if run.ctx.on_iteration:
        run.ctx.on_iteration(stats)
