"""Stage 3 driver: run a `QueryPlan` (strata in order) and the statements around queries."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.executor import bases, views
from recsql.executor.action import aggregate
from recsql.executor.fixpoint import GroupRun
from recsql.executor.loop import Context
from recsql.executor.recovery import Recovery
from recsql.executor.session import cancellable, overridden_conf
from recsql.executor.spark_sql import (
    as_dataframe_calls,
    from_spark_error,
    quiet_pyspark_error_logs,
    render,
    run_sql,
)
from recsql.executor.state import PARTITION, with_partition
from recsql.executor.stats import IterationStats
from recsql.parser import Statement
from recsql.planner import QueryPlan, ViewStep, cte_binding, plan_query, render_plan
from recsql.planner.catalog import StoredView
from recsql.planner.checks import locate_name, table_not_found
from recsql.planner.locate import locate
from recsql.planner.names import TableName
from recsql.planner.views import Expansion, expand_views
from recsql.settings import Settings


@dataclass
class Result:
    """What `recsql.run` returns: the DataFrame and, per recursive CTE and iteration, stats."""

    df: DataFrame
    stats: list[IterationStats] = field(default_factory=list)
    plan: QueryPlan | None = None
    kind: str = "query"  # "query", "command" or "explain"


class SparkCatalog:
    """The planner's view of the session catalog (temp views, tables)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        # What one statement asked, answered once: the view expansion and the planner ask about
        # the same tables (a base table's columns up to three times, each a Spark analysis), and
        # nothing the statement does changes the catalog before it has been planned.
        self._columns: dict[TableName, list[str] | None] = {}
        self._views: dict[TableName, StoredView | None] = {}
        # `spark.table` of each table asked about, analysed once; the statement's execution reads
        # the same frames (`Context.tables`: the endgame's identity checks and copies)
        self.frames: dict[TableName, DataFrame] = {}

    def columns(self, table: TableName) -> list[str] | None:
        if table not in self._columns:
            try:  # quoted part by part, `spark.table` resolves the name exactly as the SQL does
                self._columns[table] = self.frame(table).columns
            except AnalysisException:
                self._columns[table] = None
        found = self._columns[table]
        return None if found is None else list(found)

    def tables(self, namespace: tuple[str, ...] = ()) -> list[str]:
        try:
            if not namespace:
                return [t.name for t in self.spark.catalog.listTables()]
            # a schema's listing also holds the session's temp views, which no qualified name reads
            listed = self.spark.catalog.listTables(TableName(namespace).sql)
            return [t.name for t in listed if not t.isTemporary]
        except AnalysisException:  # no such schema
            return []

    def recursive_view(self, table: TableName) -> StoredView | None:
        if table not in self._views:
            self._views[table] = views.stored_view(self.spark, table.sql, lambda: self.frame(table))
        return self._views[table]

    def frame(self, table: TableName) -> DataFrame:
        """`spark.table(table)`, analysed once: a temporary view's schema tells whether it is a
        recursive view, and is then also the columns the planner asks for."""
        return bases.read_once(self.frames, self.spark, table)


@dataclass
class Runner:
    """Runs one statement on `spark`; `frames` binds keyword-argument DataFrames."""

    spark: SparkSession
    settings: Settings
    args: dict | None
    frames: dict[str, DataFrame]
    on_iteration: Callable[[IterationStats], None] | None = None
    resume: bool = False  # continue recursive groups from their latest matching checkpoint

    def plan(self, query: exp.Query, sql: str) -> QueryPlan | None:
        with quiet_pyspark_error_logs():
            return plan_query(query, sql, self.catalog, demand=self.settings.demand_enabled)

    def expand(self, query: exp.Query, sql: str) -> Expansion:
        """`query` with the recursive views it reads expanded into CTEs."""
        with quiet_pyspark_error_logs():
            return expand_views(query, self.catalog, sql)

    @cached_property
    def catalog(self) -> SparkCatalog:
        """The catalog as this statement plans against it (a runner runs one statement)."""
        return SparkCatalog(self.spark)

    def execute(self, plan: QueryPlan) -> Result:
        with cancellable(self.spark, "run"), self.iteration_settings(), quiet_pyspark_error_logs():
            ctx = self.context(plan)
            try:
                ctx.recovery = Recovery.for_statement(self.spark, self.settings, plan, self.args,
                                                      self.frames, self.resume)
                stats = []
                steps, final = inline_trailing_views(plan)
                for step in steps:
                    stats += self.run_step(ctx, step)
                df = self.sql(final, ctx.env, plan.sql)
                ctx.recovery.finish()
            finally:  # the states are checkpoints: the answer does not read the base copies
                bases.release(ctx)
        return Result(df=df, stats=stats, plan=plan)

    def typed(self, plan: QueryPlan) -> DataFrame:
        """The answer's columns and types, with no Spark job and no iteration: every recursive
        group's CTEs bound to empty DataFrames of the head types its fixpoint has (inferred by
        analysis alone, `schemas.infer_schemas`, as the fixpoint's own states are), the other
        CTEs and the final query analysed over them. As Spark analyses a view's body when it is
        created, without running it."""
        with quiet_pyspark_error_logs():
            ctx = self.context(plan)
            for step in plan.steps:
                if isinstance(step, ViewStep):
                    self.run_step(ctx, step)
                    continue
                for key, df in GroupRun(ctx, step).unevaluated().items():
                    ctx.env[cte_binding(key)] = df
            return self.sql(plan.final, ctx.env, plan.sql)

    def explain(self, plan: QueryPlan, mode: str) -> str:
        """The recursive plan, then Spark's physical plan of one iteration of the first group.

        Shows a real iteration, so the earlier strata and the group's base step are run."""
        text = [render_plan(plan)]
        with self.iteration_settings(), quiet_pyspark_error_logs():
            ctx = self.context(plan)
            try:
                for step in plan.steps:
                    if isinstance(step, ViewStep) or not step.recursive:
                        self.run_step(ctx, step)
                        continue
                    text.append(f"== Spark physical plan of one iteration of {', '.join(step.names)} ==")
                    text.append(_iteration_plan(GroupRun(ctx, step), mode))
                    break
            finally:
                bases.release(ctx)
        return "\n".join(text)

    def context(self, plan: QueryPlan) -> Context:
        return Context(
            spark=self.spark, settings=self.settings, partitions=self.partitions,
            args=self.args, sql=plan.sql, env=dict(self.frames), bases={},
            on_iteration=self.on_iteration, tables=self.catalog.frames,
        )

    def run_step(self, ctx: Context, step) -> list[IterationStats]:
        if isinstance(step, ViewStep):
            df = self.sql(step.query, ctx.env, ctx.sql)
            ctx.env[cte_binding(step.name)] = df.toDF(*step.columns) if step.columns else df
            return []
        group = GroupRun(ctx, step)
        for key, df in group.run().items():
            ctx.env[cte_binding(key)] = df
        return group.stats

    def sql(self, node: exp.Expr, env: dict[str, DataFrame], user_sql: str) -> DataFrame:
        used = {k: v for k, v in env.items() if _binds(node, k)}
        if not self.args:
            calls = as_dataframe_calls(node, used)
            if calls is not None:
                return calls
        return run_sql(self.spark, render(node, escape_braces=bool(used)), used, self.args, user_sql, node)

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
        setting = self.spark.conf.get("spark.sql.shuffle.partitions", "200")
        if setting is None:  # never with a default given; pyspark types get() as Optional regardless
            raise AssertionError("spark.sql.shuffle.partitions has no value")
        width = int(setting)
        slots = task_slots(self.spark) if width > 1 else None  # 1 is within the cap anywhere
        return min(width, slots) if slots else width

    def iteration_settings(self):
        """AQE off keeps the state's hash partitioning visible to the planner (one exchange per
        iteration); the shuffle width is the state's partition count. Both are restored."""
        return overridden_conf(self.spark, {
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": str(self.partitions),
        })


def task_slots(spark: SparkSession) -> int | None:
    """How many tasks a local master runs at once (local[N]: N); None on a cluster, whose
    executors may still be registering or come and go with dynamic allocation, so that what it
    has now is no bound on the statement's parallelism."""
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


def _binds(node: exp.Expr, binding: str) -> bool:
    return any(
        isinstance(t.this, exp.Placeholder) and t.this.name == binding for t in node.find_all(exp.Table)
    )


def _iteration_plan(group: GroupRun, mode: str) -> str:
    group.step(0, group.base_candidates)
    for cte in group.group.ctes:
        df, _ = group.recursive_candidates(1)[cte.key]
        if df is None:
            continue
        merged = group.states[cte.key].merge(df)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            merged.explain(mode=_SPARK_EXPLAIN_MODES.get(mode, "simple"))
        return out.getvalue().rstrip()
    return "(the base step produced no rows, so no iteration runs)"


_SPARK_EXPLAIN_MODES = {"SIMPLE": "simple", "EXTENDED": "extended", "FORMATTED": "formatted",
                        "CODEGEN": "codegen", "COST": "cost"}


def run_statement(runner: Runner, statement: Statement, passthrough: Callable[[], DataFrame]) -> Result:
    """Dispatch one statement: recursive forms run here, everything else goes to Spark."""
    node = statement.expression
    if node is None:
        return Result(df=passthrough(), kind="command")
    if statement.explain:
        plan = runner.plan(runner.expand(node, statement.text).query, statement.text) \
            if isinstance(node, exp.Query) else None
        if plan is None:
            return Result(df=passthrough(), kind="explain")
        text = runner.explain(plan, statement.explain)
        return Result(df=runner.spark.createDataFrame([(text,)], "plan string"), plan=plan, kind="explain")
    if isinstance(node, exp.Query):
        plan = runner.plan(runner.expand(node, statement.text).query, statement.text)
        return runner.execute(plan) if plan else Result(df=passthrough())
    if isinstance(node, exp.Create) and isinstance(node.expression, exp.Query):
        return _create(runner, statement, node, passthrough)
    if isinstance(node, exp.Insert) and isinstance(node.expression, exp.Query):
        plan = runner.plan(runner.expand(node.expression, statement.text).query, statement.text)
        if plan is None:
            return Result(df=passthrough(), kind="command")
        target = _target(node)
        if runner.catalog.columns(TableName.of(target)) is None:  # before the fixpoint, as Spark would
            raise table_not_found(target, statement.text, runner.catalog)
        result = runner.execute(plan)
        overwrite = bool(node.args.get("overwrite"))
        with _writing(target, statement.text):
            result.df.write.insertInto(TableName.of(target).sql, overwrite=overwrite)
        return Result(df=_empty(runner.spark), stats=result.stats, plan=plan, kind="command")
    return Result(df=passthrough(), kind="command")


def _create(runner: Runner, statement: Statement, node: exp.Create, passthrough) -> Result:
    kind = (node.args.get("kind") or "").upper()
    expansion = runner.expand(node.expression, statement.text)
    plan = runner.plan(expansion.query, statement.text)
    name = _target(node).sql("rasql")
    if plan is None:
        try:
            return Result(df=passthrough(), kind="command")
        except RecSQLAnalysisError as error:
            if kind != "VIEW" or "TEMP" not in error.condition:
                raise
            # A permanent view over temporary objects: Spark refuses, RaDlog kept it per session.
            warnings.warn(f"view {name} refers to temporary objects; registered as a temporary "
                          "view of this session", stacklevel=4)
            df = runner.spark.sql(render(node.expression, escape_braces=False), args=runner.args)
            with _writing(_target(node), statement.text):
                _with_columns(df, node).createOrReplaceTempView(name)
            return Result(df=_empty(runner.spark), kind="command")
    if kind == "VIEW":
        return _create_recursive_view(runner, statement, node, plan, expansion)
    result = runner.execute(plan)
    writer = result.df.write
    fmt = _using(node)
    if fmt:
        writer = writer.format(fmt)
    with _writing(_target(node), statement.text):
        writer.saveAsTable(name, mode="overwrite" if node.args.get("replace") else "errorifexists")
    return Result(df=_empty(runner.spark), stats=result.stats, plan=plan, kind="command")


def _target(node: exp.Create | exp.Insert) -> exp.Table:
    """The table a CREATE or INSERT writes (`db.t` of `INSERT INTO db.t (a, b) ...`)."""
    return node.this.this if isinstance(node.this, exp.Schema) else node.this


@contextlib.contextmanager
def _writing(target: exp.Table, sql: str):
    """Spark's refusal of a statement's target (no such schema, a table that exists, a temp
    view name of several parts) as a recsql error that points at the target's name."""
    try:
        yield
    except AnalysisException as error:
        raise from_spark_error(error, sql, at=locate_name(target, sql)) from None


def _create_recursive_view(runner: Runner, statement: Statement, node: exp.Create, plan: QueryPlan,
                           expansion: Expansion) -> Result:
    """Store a view that needs recsql: its definition, expanded by every statement that reads
    it, and a Spark view of its columns and types that refuses to be read without recsql. The
    query is analysed here, not run, as Spark analyses a view's body when it is created: that
    checks it and gives the columns their types (`Runner.typed`; running the fixpoint to learn
    them took minutes over a large graph)."""
    table = _target(node)
    name = table.sql("rasql")
    temporary = any(isinstance(p, exp.TemporaryProperty) for p in _properties(node))
    replace, if_not_exists = bool(node.args.get("replace")), bool(node.args.get("exists"))
    _check_storable(runner, statement, name, plan, node)
    if not temporary:
        reason = _temporary_reads(runner.spark, expansion)
        if reason:
            # Spark refuses a permanent view over temporary objects; RaDlog kept it per session.
            warnings.warn(f"view {name} refers to temporary {reason}; registered as a temporary "
                          "view of this session", stacklevel=4)
            temporary = True
    existing = _existing(runner.spark, name, temporary)
    if existing and if_not_exists:
        return Result(df=_empty(runner.spark), plan=plan, kind="command")
    if existing and not replace:
        raise RecSQLAnalysisError(
            f"Cannot create view `{name}` because it already exists; choose a different name, "
            "drop or replace the existing view (CREATE OR REPLACE), or add IF NOT EXISTS",
            condition="TABLE_OR_VIEW_ALREADY_EXISTS", **locate(table, statement.text))
    schema = _with_columns(runner.typed(plan), node).schema
    text = node.expression.sql("rasql")
    if temporary:
        views.create_temporary(runner.spark, name, schema, text)
    else:
        create = views.create_statement(table, schema, text, replace=replace, if_not_exists=if_not_exists)
        try:
            with quiet_pyspark_error_logs():
                runner.spark.sql(create)
        except AnalysisException as error:
            raise from_spark_error(error, statement.text) from None
    return Result(df=_empty(runner.spark), plan=plan, kind="command")


def _check_storable(runner: Runner, statement: Statement, name: str, plan: QueryPlan,
                    node: exp.Create) -> None:
    """A view keeps text: parameters bound for this one statement cannot be kept with it."""
    bound = sorted(plan.parameters) or sorted(runner.frames)
    if bound:
        raise RecSQLAnalysisError(
            f"View `{name}` cannot keep the parameter(s) {', '.join(bound)} bound for this "
            "statement (Spark refuses parameters in views too); write the values into its text "
            "or create a table instead",
            condition="RECSQL_VIEW_WITH_PARAMETERS", **locate(node.expression, statement.text))


def _temporary_reads(spark: SparkSession, expansion: Expansion) -> str | None:
    """What temporary object the expanded view body reads, if any (`view x`), else None."""
    for view in expansion.views:
        if view.temporary:
            return f"view {view.name}"
    local = {c.alias.lower() for c in expansion.query.find_all(exp.CTE)}
    for table in expansion.query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.args.get("db") \
                or table.name.lower() in local:
            continue
        try:
            if spark.catalog.getTable(table.name).isTemporary:
                return f"view {table.name}"
        except AnalysisException:
            continue
    return None


def _existing(spark: SparkSession, name: str, temporary: bool) -> bool:
    """Whether creating view `name` meets an object of its kind: a temporary view for a
    temporary one, anything in the catalog for a permanent one."""
    try:
        with quiet_pyspark_error_logs():
            found = spark.catalog.getTable(name)
    except AnalysisException:
        return False
    return bool(found.isTemporary) if temporary else not found.isTemporary


def _with_columns(df: DataFrame, node: exp.Create) -> DataFrame:
    """Apply a `CREATE VIEW v (a, b)` column list."""
    if isinstance(node.this, exp.Schema) and node.this.expressions:
        return df.toDF(*[c.name for c in node.this.expressions])
    return df


def _properties(node: exp.Create) -> list[exp.Expr]:
    props = node.args.get("properties")
    return list(props.expressions) if props else []


def _using(node: exp.Create) -> str | None:
    for prop in _properties(node):
        if isinstance(prop, exp.FileFormatProperty):
            return prop.name or prop.this.name
    return None


def _empty(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "result string").limit(0)


__all__ = ["Result", "Runner", "SparkCatalog", "from_spark_error", "run_statement"]
