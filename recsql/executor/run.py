"""Stage 5: run an analysed plan (`analysis.AnalysedPlan`), its strata in order, on Spark. What a statement does
with the answer (return it, store it, explain it) is the statement layer's (`recsql.statements`);
the executor sees only the plan's data model."""

from __future__ import annotations

import contextlib
import io
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from recsql.executor.analysis import stage as analysis
from recsql.executor.analysis.stage import AnalysedPlan
from recsql.executor.loop.action import AGGREGATE_MAP_BITS, SPARK_MAP_BITS, aggregate
from recsql.executor.loop.fixpoint import GroupRun
from recsql.executor.loop.invariants import hoisted
from recsql.executor.loop.protocols import Context, PartitionedBase
from recsql.executor.loop.session import cancellable, overridden_conf
from recsql.executor.loop.spark_sql import query_df, quiet_pyspark_error_logs
from recsql.executor.loop.stats import IterationStats
from recsql.executor.state import bases
from recsql.executor.state.relations import PARTITION, with_partition
from recsql.executor.strategies import index
from recsql.executor.strategies.recovery import Recovery
from recsql.planner.model import GroupStep, QueryPlan, ViewStep, cte_binding
from recsql.planner.names import TableName
from recsql.settings import Settings


@dataclass
class Evaluated:
    """A plan's answer, its statistics per recursive CTE and iteration, and each recursive CTE's
    final state (by key) with its row count (what a materialized view stores); `rows`: the
    states the driver finished, as the Arrow tables it made them from (by key)."""

    df: DataFrame
    stats: list[IterationStats]
    states: dict[str, tuple[DataFrame, int]]
    rows: dict[str, Any] = field(default_factory=dict)


ADAPTIVE, SHUFFLE_PARTITIONS = "spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions"

# How a recursive group's run is made: a plain `GroupRun`, or one that starts elsewhere (a
# materialized view's refresh continues a stored fixpoint: `executor/strategies/seeded.py`)
GroupStart = Callable[[Context, GroupStep, dict[str, StructType]], GroupRun]


@dataclass
class Executor:
    """Runs the plans of one statement on `spark`; `frames` binds keyword-argument DataFrames,
    `tables` are the base tables as the statement's binding read them (`spark.table`, analysed
    once: the endgame's identity checks and copies read the same frames)."""

    spark: SparkSession
    settings: Settings
    args: dict | None
    frames: dict[str, DataFrame]
    tables: dict[TableName, DataFrame]
    on_iteration: Callable[[IterationStats], None] | None = None
    resume: bool = False  # continue recursive groups from their latest matching checkpoint

    def analyse(self, plan: QueryPlan) -> AnalysedPlan:
        """Stage 4: `plan` typed (`analysis.analyse`), by Spark analyses alone: no job runs."""
        return analysis.analyse(self.context(plan), plan)

    def execute(self, analysed: AnalysedPlan, start: GroupStart = GroupRun) -> Evaluated:
        """The answer of `analysed`, with its statistics and recursive states; `start` makes
        each recursive group's run."""
        plan = analysed.plan
        with cancellable(self.spark, "run"), self.iteration_settings(), quiet_pyspark_error_logs():
            ctx = self.context(plan)
            try:
                recovery = Recovery.for_statement(self.spark, self.settings, plan, self.args,
                                                  self.frames, self.resume)
                ctx.guard = recovery.guard
                stats: list[IterationStats] = []
                states: dict[str, tuple[DataFrame, int]] = {}
                rows: dict[str, Any] = {}
                steps, final = inline_trailing_views(plan)
                for step in steps:
                    if isinstance(step, GroupStep):
                        # its invariant subqueries evaluated once, the strata before it complete
                        step = hoisted(ctx, step)
                        group = start(ctx, step, analysed.group_schemas(step))
                        stats += self.run_group(ctx, group)
                        states |= {key: (ctx.env[cte_binding(key)], state.total_rows)
                                   for key, state in group.states.items()}
                        rows |= {key: made for key, state in group.states.items()
                                 if (made := state.rows_on_driver()) is not None}
                    else:
                        stats += self.run_step(ctx, step, analysed)
                df = self.sql(final, ctx.env, plan.sql)
                recovery.finish()
            finally:  # the states are checkpoints: the answer does not read the base copies
                bases.release(ctx)
        return Evaluated(df, stats, states, rows)

    def typed(self, analysed: AnalysedPlan) -> DataFrame:
        """The answer's columns and types, with no Spark job and no iteration
        (`analysis.answer_type`)."""
        return analysis.answer_type(self.context(analysed.plan), analysed)

    def iteration_plan(self, analysed: AnalysedPlan, mode: str) -> list[str]:
        """Spark's physical plan of one iteration of the first recursive group, with a heading,
        built with no Spark job: the earlier steps bound as the analysis binds them, the group's
        states and deltas stand-ins of their head types (`_iteration_plan`)."""
        text: list[str] = []
        with self.iteration_settings(), quiet_pyspark_error_logs():
            ctx = self.context(analysed.plan)
            for step in analysed.plan.steps:
                if isinstance(step, GroupStep) and step.recursive:
                    text.append(f"== Spark physical plan of one iteration of {', '.join(step.names)} ==")
                    text.append(_iteration_plan(GroupRun(ctx, step, analysed.group_schemas(step)), mode))
                    break
                analysis.bind_unevaluated(ctx, step, analysed.schemas)
        return text

    def context(self, plan: QueryPlan) -> Context:
        return Context(
            spark=self.spark, settings=self.settings, partitions=self.partitions,
            args=self.args, sql=plan.sql, env=dict(self.frames), bases={},
            on_iteration=self.on_iteration, tables=self.tables,
            aggregate_map_bits=SPARK_MAP_BITS if self.sizes_aggregate_map else None,
        )

    def run_step(self, ctx: Context, step: ViewStep | GroupStep, analysed: AnalysedPlan) -> list[IterationStats]:
        if isinstance(step, ViewStep):
            df = self.sql(step.query, ctx.env, ctx.sql)
            ctx.env[cte_binding(step.name)] = df.toDF(*step.columns) if step.columns else df
            return []
        return self.run_group(ctx, GroupRun(ctx, step, analysed.group_schemas(step)))

    def run_group(self, ctx: Context, group: GroupRun) -> list[IterationStats]:
        """Run a recursive group to its fixpoint, binding each CTE's result for the steps after."""
        for key, df in group.run().items():
            ctx.env[cte_binding(key)] = df
        return group.stats

    def sql(self, node: exp.Expr, env: dict[str, DataFrame], user_sql: str) -> DataFrame:
        return query_df(self.spark, node, env, self.args, user_sql)

    @cached_property
    def partitions(self) -> int:
        """The recursive state's partition count: `spark.recsql.partitions` if set, else
        `spark.sql.shuffle.partitions`, on a local master capped at one task per core (read once
        per statement: the iterations run with the shuffle width set to it).

        recsql turns AQE off for its iterations (it would hide the state's partitioning), so
        nothing coalesces the shuffle width for it: with Spark's default 200 partitions on
        local[2], RMAT 2^16 SSSP took 110 s on the Spark loop instead of 3.5 s with 4, each
        iteration paying 200 tiny tasks per stage (benchmarks/FINDINGS.md, partitions, at commit 5065802).
        One task per core rather than two: on local[2], 4 partitions took 1.16x the time of 2 at
        RMAT 2^16 SSSP, 1.10x CC, 1.04x at 2^20 SSSP, 1.02x CC (benchmarks/FINDINGS.md): a
        second wave of tasks costs its fixed overhead and balanced none of RMAT's skew."""
        configured = self.settings.partitions
        if configured:
            return configured
        width = int(self.session_conf[SHUFFLE_PARTITIONS] or "200")  # unset: Spark's default
        slots = task_slots(self.spark) if width > 1 else None  # 1 is within the cap anywhere
        return min(width, slots) if slots else width

    def iteration_settings(self):
        """AQE off keeps the state's hash partitioning visible to the planner (one exchange per
        iteration); the shuffle width is the state's partition count; the partial aggregates'
        fast hash map starts at Spark's size, and each iteration's action sizes it for its
        relation (`action.size_aggregate_map`) unless the session sets it. All are restored."""
        settings = {ADAPTIVE: "false", SHUFFLE_PARTITIONS: str(self.partitions)}
        if self.sizes_aggregate_map:
            settings[AGGREGATE_MAP_BITS] = str(SPARK_MAP_BITS)
        return overridden_conf(self.spark, settings, known=self.session_conf)

    @cached_property
    def sizes_aggregate_map(self) -> bool:
        """Whether recsql sizes the partial aggregates' fast hash map: the session does not set it
        (read once, before the iterations' settings override it)."""
        return self.session_conf[AGGREGATE_MAP_BITS] is None

    @cached_property
    def session_conf(self) -> dict[str, str | None]:
        """The session's own values (None: unset) of the keys the iterations override, read once
        per statement, before they are overridden: the partition count, the aggregate map's
        sizing and the values restored afterwards all come from this one read."""
        return {key: self.spark.conf.get(key, None)
                for key in (ADAPTIVE, SHUFFLE_PARTITIONS, AGGREGATE_MAP_BITS)}


def task_slots(spark: SparkSession) -> int | None:
    """How many tasks a local master runs at once (local[N]: N); None on a cluster, whose
    executors may still be registering or come and go with dynamic allocation, so that what it
    has now is no bound on the statement's parallelism. Asked once per application
    (`bases.owner`): the master and a local master's parallelism are fixed when it starts, and
    the asking is three round trips to Spark (on Spark Connect, a job)."""
    key = bases.owner(spark)
    with _SLOTS_LOCK:
        if key in _SLOTS:
            return _SLOTS[key]
    slots = _task_slots(spark)  # outside the lock: on Spark Connect a job
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(key, slots)


_SLOTS: weakref.WeakKeyDictionary[Any, int | None] = weakref.WeakKeyDictionary()
_SLOTS_LOCK = threading.Lock()


def _task_slots(spark: SparkSession) -> int | None:
    master = spark.conf.get("spark.master", None)
    if not master or not master.startswith("local"):
        return None
    try:
        return spark.sparkContext.defaultParallelism
    except (PySparkException, AttributeError):  # Spark Connect: JVM_ATTRIBUTE_NOT_SUPPORTED
        pass
    # Connect does not report it, but a range without a partition count is split over it (one
    # tiny job)
    last = aggregate(with_partition(spark.range(0, 1 << 16)), [F.max(PARTITION).alias("last")])["last"]
    return None if last is None else last + 1


def inline_trailing_views(plan: QueryPlan) -> tuple[list, exp.Expr]:
    """The plan's steps and final query with the plain CTEs that only the final query reads
    (the view steps after the last recursive group, each read once) written into it as derived
    tables: the final query is then one Spark analysis instead of one per view step, each of
    which also registered and dropped a temporary view per DataFrame it bound (a warm filtered
    closure view statement ran two). The same query for Spark: a DataFrame bound by name is a
    view, which Spark expands in place as it does a derived table."""
    steps, final = list(plan.steps), plan.final
    while steps and isinstance(steps[-1], ViewStep):
        step = steps[-1]
        binding = cte_binding(step.name)
        reads = [t for t in final.find_all(exp.Table)
                 if isinstance(t.this, exp.Placeholder) and t.this.name == binding]
        if len(reads) != 1:
            break
        if final is plan.final:
            final = final.copy()
            reads = [t for t in final.find_all(exp.Table)
                     if isinstance(t.this, exp.Placeholder) and t.this.name == binding]
        columns = [exp.to_identifier(c, quoted=True) for c in step.columns]
        reads[0].replace(exp.Subquery(this=step.query.copy(), alias=exp.TableAlias(
            this=exp.to_identifier(reads[0].alias_or_name, quoted=True), columns=columns)))
        steps.pop()
    return steps, final


def _iteration_plan(group: GroupRun, mode: str) -> str:
    """Spark's plan of `group`'s iteration 1 with no job run: every state and delta a stand-in
    of its head types placed by its key as the loop places them (`_stand_in`), every base table
    the repartitioned copy the base step would cache. The base step does not run, so the plan is
    the one Spark makes for a delta whose sizes no action has measured."""
    ctx = group.ctx
    for state in group.states.values():
        stand_in = state.shuffle_by_key(_stand_in(ctx.spark, state.schema)).localCheckpoint(eager=False)
        state.restore(stand_in, stand_in, delta_rows=1, total_rows=1)
    for cte in group.group.ctes:
        for branch in [*cte.recursive_branches, *([cte.doubling] if cte.doubling else [])]:
            for base in branch.bases:
                if base.key not in ctx.bases:
                    ctx.bases[base.key] = _stand_in_base(ctx, base.table, base.columns)
    for cte in group.group.ctes:
        df, _ = group.recursive_candidates(1)[cte.key]
        if df is None:
            continue
        merged = group.states[cte.key].merge(df)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            merged.explain(mode=_SPARK_EXPLAIN_MODES.get(mode, "simple"))
        return out.getvalue().rstrip()
    return "(no recursive branch reads a delta)"


def _stand_in_base(ctx: Context, table: TableName, columns: tuple[str, ...]) -> PartitionedBase:
    """The copy of a base table the base step would cache (`GroupRun.materialize_base`), as a
    plan only: repartitioned by its join columns, and grouped into its adjacency index where
    that is on (nothing is cached or counted, so no job runs)."""
    copy = bases.table_df(ctx, table).repartition(ctx.partitions, *columns)
    grouped = index.build(copy, columns) if ctx.settings.index_enabled else None
    if grouped is None:
        return PartitionedBase(copy.sortWithinPartitions(*columns))
    return PartitionedBase(index.unnested(grouped, columns, copy.columns), index=grouped)


def _stand_in(spark: SparkSession, schema: StructType) -> DataFrame:
    """No rows of `schema`, in a form Spark's optimizer cannot see through, so that a plan over
    it is the plan over a real state: parsed from JSON (a column of NULL casts, `state.empty`,
    lets Spark infer that every key is NULL, and with it that the join finds nothing), lazily
    checkpointed by the caller as the loop's states are (nothing runs until an action)."""
    parsed = F.from_json(F.col("id").cast("string"), schema).alias("row")
    return spark.range(0).select(parsed).select("row.*")


_SPARK_EXPLAIN_MODES = {"SIMPLE": "simple", "EXTENDED": "extended", "FORMATTED": "formatted",
                        "CODEGEN": "codegen", "COST": "cost"}


__all__ = ["Evaluated", "Executor", "GroupStart", "inline_trailing_views", "task_slots"]
