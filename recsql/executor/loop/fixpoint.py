"""Stage 3: evaluate one recursive group to its fixpoint, semi-naively, on Spark.

Each iteration: every recursive branch runs once per delta rule with the previous deltas bound
to its references; the candidates of each CTE are merged into its partitioned state; the merge
is observed and `localCheckpoint`ed in ONE Spark action, which also yields the delta size that
ends the loop. Checkpointing cuts the lineage, so iteration N plans as fast as iteration 1.
"""

from __future__ import annotations

import time

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from recsql.errors import RecSQLExecutionError
from recsql.executor import endgame
from recsql.executor.analysis.stage import check_width, with_contributor
from recsql.executor.loop.action import aggregate, checkpoint_merge, spark_job
from recsql.executor.loop.failures import BlocksLost
from recsql.executor.loop.limits import SparkLimits, recursion_ends
from recsql.executor.loop.protocols import Context, IterationRunner, PartitionedBase, Rider, Safeguard
from recsql.executor.loop.spark_sql import describe_jobs, render, run_sql
from recsql.executor.loop.stats import IterationStats
from recsql.executor.state import bases
from recsql.executor.state.relations import (
    CONTRIB,
    PARTITION,
    RelationState,
    make_state,
    union_all,
    with_partition,
)
from recsql.executor.strategies import index, joinside, keybound, lookup, rollover, skew
from recsql.planner.model import DELTA, Branch, CTEPlan, GroupStep, base_key
from recsql.planner.names import TableName


class GroupRun:
    building = 0  # the iteration the runners are building (set by `run`; 0: the base step)
    from_base = False  # the states came from this run's own base step (`start`)

    def __init__(self, ctx: Context, group: GroupStep, schemas: dict[str, StructType]) -> None:
        """`schemas`: each CTE's head types, as the analysis stage found them."""
        self.ctx = ctx
        self.group = group
        self.texts: dict[tuple[str, int], str] = {}  # (cte, id(branch)) -> SQL text, rendered once
        # (cte, id(branch), width) -> the names and Columns that shape its output
        self.shapes: dict[tuple[str, int, int], tuple[list[str], list[Column]]] = {}
        self.stats: list[IterationStats] = []
        self.base_seconds = 0.0  # finding or making base copies since the last iteration's stats
        self.states: dict[str, RelationState] = {
            cte.key: make_state(
                ctx.spark, cte, schemas[cte.key], ctx.partitions, ctx.settings.sum_tolerance
            )
            for cte in group.ctes
        }
        # What keeps the work through a failure: checkpoints, resumed and reloaded.
        self.safeguard: Safeguard = ctx.guard(self)
        self.spark_limits = SparkLimits.of(ctx.spark, group)
        self.skew = skew.Balancer(self)
        sliced = rollover.Slices(self)
        self.driver = endgame.Driver(self)
        self.lookup = lookup.Lookup(self)
        self.index = index.Index(self, self.lookup)
        # The ways to run the next iteration(s), asked in this order; the first that does not
        # decline runs them: the rest of the fixpoint on the driver, the next iteration in
        # slices, the next iteration whole on Spark (never declines).
        self.runners: tuple[IterationRunner, ...] = (self.driver, sliced, Whole(self))
        # What rides on a whole iteration's one action, in this order: heavy keys and the join's
        # balance (for the next iteration's split), the join output and its next estimate (for
        # the next iteration's roll-over decision), a tiny next delta's join keys (for the next
        # iteration's key lookup), whether it read an adjacency index (for its statistics).
        self.riders: tuple[Rider, ...] = (self.skew, sliced, self.lookup, self.index)

    # -- running branches -------------------------------------------------------------

    def text(self, cte: CTEPlan, branch: Branch) -> str:
        key = (cte.key, id(branch))  # a CTE's doubling rule shares its linear branch's index
        if key not in self.texts:
            self.texts[key] = render(with_contributor(cte, branch), escape_braces=True)
        if branch.recursive and branch.seeded:
            return render(self.query(cte, branch), escape_braces=True)
        return self.texts[key]

    def query(self, cte: CTEPlan, branch: Branch) -> exp.Expr:
        """The branch as this iteration runs it: with a sum/count's contributor, and its seeds
        shifted (Spark seeds a recursive term's rand(seed), uuid(seed), ... afresh at every
        step: seed + steps before it)."""
        return with_contributor(cte, branch, branch.select_at(self.building, self.ctx.args))

    def branch_df(self, cte: CTEPlan, branch: Branch, refs: dict[str, DataFrame],
                  broadcast_bases: bool = False, bases: dict[str, DataFrame] | None = None) -> DataFrame:
        bindings = {**self.ctx.env, **refs}
        for base in branch.bases:
            df = (bases or {}).get(base.binding)
            if df is None:
                df = self.base(cte, base.table, base.columns)
                if base.keys_only:  # one row per key answers the branch (`BaseRelation.keys_only`)
                    df = index.keys(self.ctx.bases[base.key], base.columns)
            bindings[base.binding] = df.hint("broadcast") if broadcast_bases else df
        text = self.text(cte, branch)
        used = {k: v for k, v in bindings.items() if "{" + k + "}" in text}
        return run_sql(self.ctx.spark, text, used, self.ctx.args, self.ctx.sql, branch.select)

    def base(self, cte: CTEPlan, table: TableName, columns: tuple[str, ...]) -> DataFrame:
        """The base table hash-partitioned by its join columns, materialized once (and kept across
        statements while its input is unchanged: `bases.partitioned`)."""
        key = base_key(table, columns)
        if key not in self.ctx.bases:
            started = time.perf_counter()
            self.ctx.bases[key] = bases.partitioned(
                self.ctx, table, columns,
                lambda plan, identify: self.materialize_base(cte, plan, columns, identify))
            self.base_seconds += time.perf_counter() - started
        return self.ctx.bases[key].df

    def materialize_base(self, cte: CTEPlan, plan: DataFrame, columns: tuple[str, ...],
                         identify: bool = False) -> PartitionedBase:
        """Cache the repartitioned base in Spark's columnar in-memory store, counting its rows per
        partition (and its heavy keys with balancing on, and with `identify` the identity of its
        rows: `bases.row_identity`) in the one job that fills the cache (cached rather than
        checkpointed: see `bases.py`)."""
        sizes = [F.count_if(F.col(PARTITION) == k).alias(f"p{k}") for k in range(self.ctx.partitions)]
        keys = skew.base_metrics(plan.schema, tuple(columns), self.ctx.settings)
        stored = index.build(plan, columns) if self.ctx.settings.index_enabled else None
        if stored is not None:
            # the adjacency index is the copy: its rows are the index unnested (index.py)
            stored = stored.persist()
            cached = index.unnested(stored, columns, plan.columns)
        else:
            # sorted by the join columns, so that the cache's per-batch key ranges let a tiny
            # delta skip most of the copy (lookup.py)
            cached = plan.sortWithinPartitions(*columns).persist()
        counted, sums = cached, []
        if identify:
            try:  # analysed now (Spark Connect analyses lazily): a map column cannot be hashed
                counted = bases.hashed(cached, keep=True)
                counted.schema  # noqa: B018
                sums = [F.expr(sum_) for sum_ in bases.HASH_SUMS]
            except PySparkException:
                counted = cached
        with spark_job(cte, 0):
            counts = aggregate(with_partition(counted), [*sizes, *keys, *sums])
        partitioned = PartitionedBase(cached, index=stored)
        partitioned.identity = bases.rows_identity(counts) if sums else None
        partitioned.partition_rows = [counts[f"p{k}"] for k in range(self.ctx.partitions)]
        partitioned.top_keys = skew.as_keys(counts.get("skew_top"))
        return partitioned

    def base_sizes(self, branch: Branch) -> list[int] | None:
        """Per-partition rows of the branch's (first) pre-partitioned base table, if known."""
        for base in branch.bases:
            known = self.ctx.bases.get(base.key)
            return known.partition_rows if known is not None else None
        return None

    def shape(self, cte: CTEPlan, branch: Branch, df: DataFrame) -> DataFrame:
        """Cast a branch's output to the head's names and types (plus the contributor)."""
        width = len(df.columns)
        key = (cte.key, id(branch), width)
        if key not in self.shapes:  # built once: each Column node costs a Py4J round trip
            self.shapes[key] = self.shape_columns(cte, branch, width)
        names, outputs = self.shapes[key]
        # Rename positionally first: branch outputs may repeat a name (`a.Child, b.Child`).
        return df.toDF(*names).select(*outputs)

    def shape_columns(self, cte: CTEPlan, branch: Branch, width: int):
        schema = self.states[cte.key].schema
        head_width = width - (1 if cte.summing and branch.recursive else 0)
        check_width(cte, branch, head_width, self.ctx.sql)
        names = [f"__rq_c{i}" for i in range(width)]
        outputs = [
            F.col(name).cast(field.dataType).alias(field.name)
            for name, field in zip(names[:head_width], schema.fields)
        ]
        if cte.summing:
            contrib = (
                F.col(names[-1]) if branch.recursive
                else F.to_json(F.struct(F.lit(branch.index).alias("b"), *outputs))
            )
            outputs.append(contrib.alias(CONTRIB))
        return names, outputs

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> dict[str, DataFrame]:
        """Resume from the latest checkpoint, or run the whole fixpoint on the driver if it fits
        from the start, or run the base step; then, while a delta is live, let the first runner
        that takes them run the next iteration(s), checkpoint, and recover from blocks lost with
        an executor."""
        iteration = self.start()
        while self.live() and not self.ends(iteration):
            if iteration >= self.ctx.settings.max_iterations:
                self.fail_iteration_limit(iteration)
            self.building = iteration + 1
            try:
                iteration = next(done for runner in self.runners
                                 if (done := runner.run(iteration)) is not None)
                self.safeguard.kept(iteration)  # its write can lose blocks too
            except BlocksLost as error:  # an executor died with checkpointed blocks
                iteration = self.safeguard.recover(error)
        return {key: state.result() for key, state in self.states.items()}

    def start(self) -> int:
        """Bring the states to the end of a first iteration and return it: resumed from the
        latest checkpoint, the whole fixpoint on the driver, or the base step (a refresh of a
        materialized view starts from its stored state instead: `executor/strategies/seeded.py`)."""
        iteration = self.safeguard.resume()
        if iteration is None:
            iteration = self.driver.run_whole()
            if iteration is None:
                self.step(0, self.base_candidates)
                self.from_base = True
                iteration = 0
            else:
                self.safeguard.kept(iteration)
        return iteration

    def unevaluated(self) -> dict[str, DataFrame]:
        """Each CTE's empty state: no rows, the types the fixpoint's result has (for typing a
        statement without running it)."""
        return {key: state.result() for key, state in self.states.items()}

    def live(self) -> bool:
        return any(s.delta_rows for s in self.states.values())

    def ends(self, iteration: int) -> bool:
        """Whether the final query's LIMIT ends the fixpoint after `iteration`; Spark's limits
        raise (`limits.recursion_ends`)."""
        return recursion_ends(self.group, self.spark_limits, iteration,
                              {key: s.delta_rows for key, s in self.states.items()},
                              {key: s.total_rows for key, s in self.states.items()})

    def base_candidates(self, iteration: int = 0) -> dict[str, tuple[DataFrame | None, str]]:
        result = {}
        for cte in self.group.ctes:
            parts = [self.shape(cte, b, self.branch_df(cte, b, {})) for b in cte.base_branches]
            result[cte.key] = (union_all(parts), "-")
        return result

    def recursive_candidates(self, iteration: int) -> dict[str, tuple[DataFrame | None, str]]:
        result = {}
        for cte in self.group.ctes:
            parts, strategies = [], set()
            for branch, variants in self.rules(cte, iteration):
                for variant in variants:
                    refs, strategy = self.bind_variant(cte, branch, variant)
                    if refs is None:
                        continue
                    strategies.add(strategy)
                    df = self.skew.branch_df(cte, branch, variant, refs, strategy)
                    if df is None and strategy == "co-partitioned":
                        df = self.index.branch_df(cte, branch, variant)
                    if df is None:
                        restricted = self.lookup.bases(cte, branch, variant)
                        df = self.branch_df(cte, branch, refs, strategy == joinside.BROADCAST_BASE,
                                            restricted)
                    parts.append(keybound.drop_unchanging(self, cte, branch, self.shape(cte, branch, df)))
            result[cte.key] = (union_all(parts), "+".join(sorted(strategies)) or "-")
        return result

    def doubling_round(self, iteration: int) -> bool:
        """Whether this iteration runs a transitive closure's doubling rules (see `rules`)."""
        after = self.ctx.settings.doubling_after_iterations
        return after > 0 and iteration > after and any(c.doubling for c in self.group.ctes)

    def rules(self, cte: CTEPlan, iteration: int) -> list[tuple[Branch, tuple]]:
        """The recursive branches and their delta rules for this iteration: the linear rules,
        or, for a transitive closure that has run `doubling.afterIterations` linear iterations,
        one round of the whole relation with itself and then the doubling rules."""
        after = self.ctx.settings.doubling_after_iterations
        if cte.doubling is None or not self.doubling_round(iteration):
            return [(b, b.variants) for b in cte.recursive_branches]
        if iteration == after + 1:
            return [(cte.doubling, cte.doubling_switch)]
        return [(cte.doubling, cte.doubling.variants)]

    def bind_variant(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]):
        """DataFrames for one delta rule and its join strategy, or None when a delta it reads is
        empty."""
        refs, strategy = {}, "-"
        for ref, role in zip(branch.refs, variant):
            state = self.states[ref.cte]
            if role == DELTA:
                if state.delta_rows == 0:
                    return None, None
                strategy = self.join_strategy(cte, branch, state)
                refs[ref.binding] = state.delta.hint(_DELTA_HINTS[strategy])
            else:
                refs[ref.binding] = state.all
        return refs, _label(strategy, branch)

    def join_strategy(self, cte: CTEPlan, branch: Branch, state: RelationState) -> str:
        """Which side of the delta's join moves this iteration (see joinside: a vote of the
        partitions over the sizes the previous iteration's action reported)."""
        if self.ctx.settings.join_strategy == "auto" and branch.bases and not self.movable(branch):
            return joinside.SHUFFLE
        base_parts = self.base_sizes(branch) if branch.bases else None
        choice = joinside.decide(
            delta_parts=state.delta_partition_rows,
            base_parts=base_parts,
            delta_rows=state.delta_rows,
            base_rows=sum(base_parts) if base_parts else None,
            broadcast_rows=self.ctx.settings.broadcast_rows,
            forced=self.ctx.settings.join_strategy,
        )
        if choice == joinside.BROADCAST_DELTA and branch.copartitioned and \
                self.ctx.settings.join_strategy == "auto":
            # Co-partitioned, the delta already sits with its join partners: moving it costs a
            # broadcast job and saves nothing (measured: rmat-12 SSSP 5.04 s in place vs 5.40 s).
            return joinside.SHUFFLE
        return choice

    def movable(self, branch: Branch) -> bool:
        """Whether a vote can move the delta's join with `branch`'s base table. It cannot for a
        co-partitioned join with a base too large to broadcast (the common case of a graph's
        edge table): moving the delta gains nothing (see `join_strategy`), and the base must
        stay where it is."""
        if not branch.copartitioned:
            return True
        base_parts = self.base_sizes(branch)
        return base_parts is None or sum(base_parts) <= self.ctx.settings.broadcast_rows

    def vote_uses_sizes(self, cte: CTEPlan) -> bool:
        """Whether a join-side vote of the next iteration can use the per-partition sizes of
        `cte`'s delta, so that the action measures them: a branch reading that delta joins a
        base table, and a vote can move that join."""
        if self.ctx.settings.join_strategy != "auto":
            return False
        return any(branch.bases and any(ref.cte == cte.key for ref in branch.refs) and self.movable(branch)
                   for reader in self.group.ctes
                   for branch in [*reader.recursive_branches, *([reader.doubling] if reader.doubling else [])])

    def step(self, iteration: int, build_candidates) -> None:
        """Build every CTE's candidates from the previous states, then merge each (the first
        CTE's time includes building the candidates)."""
        started = time.perf_counter()
        # Labelled before the candidates are built: finding a kept base copy may run a job (the
        # identity scan of a cached table), which carried the previous statement's last label
        describe_jobs(self.ctx.spark, f"recsql: {self.group.ctes[0].name} iteration {iteration}")
        candidates = build_candidates(iteration)
        for cte in self.group.ctes:
            state = self.states[cte.key]
            df, strategy = candidates[cte.key]
            job_seconds = 0.0
            if df is None:
                state.no_change()
            else:
                describe_jobs(self.ctx.spark, f"recsql: {cte.name} iteration {iteration}")
                for rider in self.riders:
                    df = rider.watch(cte, df, iteration)
                watched = [m for rider in self.riders for m in rider.metrics(cte, state)]
                job_started = time.perf_counter()
                groups = state.total_rows
                metrics, reported = checkpoint_merge(self, cte, state, state.merge(df), iteration, watched,
                                                     by_partition=self.vote_uses_sizes(cte))
                job_seconds = time.perf_counter() - job_started
                keybound.learn(self, cte, groups, state.total_rows)
                for rider in self.riders:
                    rider.observed(cte, metrics, reported)
            seconds = time.perf_counter() - started
            stats = IterationStats(
                cte=cte.name, iteration=iteration, delta_rows=state.delta_rows,
                total_rows=state.total_rows, seconds=seconds, join_strategy=strategy,
                driver_seconds=seconds - job_seconds, job_seconds=job_seconds,
                base_seconds=self.base_seconds,
                **{k: v for rider in self.riders for k, v in rider.report(cte).items()},
            )
            started = time.perf_counter()
            self.base_seconds = 0.0
            self.stats.append(stats)
            if self.ctx.on_iteration:
                self.ctx.on_iteration(stats)

    def materialize(self, cte: CTEPlan, merged: DataFrame, iteration: int) -> DataFrame:
        with spark_job(cte, iteration):
            return merged.localCheckpoint(eager=True)

    def fail_iteration_limit(self, iteration: int, deltas: dict[str, int] | None = None) -> None:
        """Stop with recsql's iteration-limit error; `deltas` (CTE name -> rows) when the live
        deltas are not the states' own (the driver's)."""
        limit = self.ctx.settings.max_iterations
        if deltas is None:
            deltas = {s.cte.name: s.delta_rows for s in self.states.values()}
        name, rows = next((n, r) for n, r in deltas.items() if r)
        raise RecSQLExecutionError(
            f"spark.recsql.maxIterations = {limit} reached: CTE `{name}` still had {rows} new or "
            f"changed row(s) after iteration {iteration}, so the fixpoint was not reached and no "
            "partial result is returned. If the recursion terminates, raise the limit "
            f"(SET spark.recsql.maxIterations = {limit * 10}); a sum/count or UNION ALL over a "
            "cycle may never terminate",
            condition="RECSQL_MAX_ITERATIONS",
        )


class Whole:
    """The runner of last resort: the next iteration in one piece on Spark."""

    def __init__(self, run: GroupRun) -> None:
        self.loop = run

    def run(self, iteration: int) -> int:
        self.loop.step(iteration + 1, self.loop.recursive_candidates)
        return iteration + 1


# How the delta is hinted for each strategy (a broadcast base is hinted in branch_df).
_DELTA_HINTS = {
    joinside.BROADCAST_DELTA: "broadcast",
    joinside.BROADCAST_BASE: "shuffle_hash",
    joinside.SHUFFLE: "shuffle_hash",
}


def _label(strategy: str, branch: Branch) -> str:
    """The strategy as the statistics show it; a shuffle of a co-partitioned delta moves nothing."""
    if strategy == joinside.SHUFFLE and branch.copartitioned:
        return "co-partitioned"
    return strategy
