"""The driver loop: pull the states and the relations into an in-process DuckDB, run the
semi-naive iterations there, put the states back. Only the failures the endgame expects hand
the fixpoint back to Spark: a branch it cannot translate or an error DuckDB raises (DuckDB's own
memory limit included) leave it untouched (Spark then raises its own error, where it has one);
a fixpoint that outgrows the budgets hands Spark its states as of its last complete iteration,
so no work is lost. Any other failure is a bug and surfaces.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from pyspark.errors import PySparkNotImplementedError, PySparkTypeError, PySparkValueError
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType
from sqlglot import exp

from recsql.errors import RecSQLExecutionError
from recsql.executor.endgame import database
from recsql.executor.endgame.database import BaseCopy
from recsql.executor.endgame.decide import (
    RunInfo,
    applies,
    applies_from_start,
    held_bytes,
    last_iteration,
    relations,
    row_bytes,
)
from recsql.executor.endgame.driver_sql import Untranslatable
from recsql.executor.endgame.merges import Merge, Rounds, empty_table, merge_for, rounds_for
from recsql.executor.endgame.translate import BranchSQL, duck_type, prepare, recode_contributors
from recsql.executor.loop.action import spark_job
from recsql.executor.loop.limits import recursion_ends
from recsql.executor.loop.protocols import Loop
from recsql.executor.loop.session import overridden_conf
from recsql.executor.loop.stats import IterationStats
from recsql.executor.state import bases
from recsql.executor.state.relations import ContributorState, RelationState
from recsql.planner.model import DELTA, CTEPlan

log = logging.getLogger(__name__)
# A driver attempt's phases (pull, fixpoint, write_back), each at its start and end, as DEBUG
# records carrying `recsql_phase`, `recsql_edge` and at an end `recsql_facts`: what a profiler of
# the driver's memory listens to (benchmarks/drivermem.py). Nothing is computed unless it listens.
phases = logging.getLogger(__name__ + ".phases")


def _phase(name: str, edge: str, facts: Callable[[], dict] | None = None) -> None:
    if phases.isEnabledFor(logging.DEBUG):
        extra = {"recsql_phase": name, "recsql_edge": edge, "recsql_facts": facts() if facts else {}}
        phases.debug("%s %s", name, edge, extra=extra)

# DuckDB's memory limit is the driver budget less the Arrow relations registered in place (a
# completed CTE's rows; a base table's copy is a DuckDB table, within the limit), but never
# below what its buffers need to work at all (it failed to allocate a 2 MiB block under a 1 MiB
# limit). Within its limit DuckDB spills its tables, joins and aggregates to the temporary
# directory rather than growing (an 800 MB table, a GROUP BY and a join over it under a 200 MB
# limit: peak RSS 308 MiB, 1.5 GB spilled), so a fixpoint whose candidates outgrow the estimate
# slows down instead of taking the process's memory.
DUCKDB_MIN_MEMORY = 256 << 20
ARROW_BATCH_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default
MAX_ATTEMPTS = 3  # driver attempts per run that outgrew the budget before the endgame gives up


class Driver:
    """The runner that takes the rest of a fixpoint to the driver (one of `fixpoint.GroupRun.runners`)."""

    def __init__(self, run: Loop) -> None:
        self.loop = run
        self.info = RunInfo()

    def run(self, iteration: int) -> int | None:
        """Finish the fixpoint on the driver; its last iteration, or None (run untouched)."""
        if not applies(self.loop, self.info) or not finish_on_driver(self.loop, self.info, iteration):
            return None
        return last_iteration(self.loop)

    def run_whole(self) -> int | None:
        """The whole fixpoint, base step included, on the driver when it fits from the start:
        no Spark job but reading the relations once. Its last iteration, or None (nothing ran:
        the Spark loop runs the base step)."""
        if not applies_from_start(self.loop, self.info) or not finish_on_driver(self.loop, self.info, None):
            return None
        return last_iteration(self.loop)


def finish_on_driver(run: Loop, info: RunInfo, iteration: int | None,
                     attempt: Callable[[], _Driver] | None = None) -> bool:
    """Run the rest of the fixpoint on the driver (all of it, base step included, when
    `iteration` is None); False (run unchanged) if it cannot. `attempt` makes the attempt's
    driver in place of `_Driver` (a materialized view's refresh starts it from its stored
    state: `endgame/seeded.py`)."""
    import duckdb  # only here: `import recsql` stays light

    info.attempts += 1
    driver = None
    try:
        driver = attempt() if attempt is not None else _Driver(run, info, from_start=iteration is None)
        stats = driver.run(iteration)
        writing = time.perf_counter()
        if driver.over_budget:
            # Spark continues from the driver's last complete iteration: its states, delta
            # included, so no work is lost
            log.info("endgame: the driver fixpoint outgrew the budget after %d iteration(s); "
                     "Spark continues from there", len(stats) // len(run.group.ctes))
            driver.hand_back()
        else:
            driver.write_back()
        if stats:  # what the last iteration's report could not include
            stats[-1] = dataclasses.replace(stats[-1], write_seconds=time.perf_counter() - writing)
    except RecSQLExecutionError:
        raise  # maxIterations: the same error Spark would raise
    except (Untranslatable, duckdb.Error) as error:  # Spark continues (and, for an error
        # Spark shares, such as an overflow, raises it itself); anything else is a bug
        log.info("endgame: staying on Spark: %s: %s", type(error).__name__, error)
        info.disabled = True
        info.pulled.clear()
        return False
    finally:
        if driver is not None:
            driver.close()
    info.pulled.clear()  # a table's copy stays kept for later statements (bases.py)
    run.stats.extend(stats)  # reported to `on_iteration` as each ran (`_Driver.report`)
    if driver.over_budget:  # at least one Spark iteration before the driver is asked again
        info.not_before = last_iteration(run) + 1
        info.disabled = info.attempts >= MAX_ATTEMPTS
    return True


class _Driver:
    """One attempt: a DuckDB connection holding the group's states (per CTE: `all`, `delta`,
    the iteration's `new` candidates, a sum/count head's `contrib`; or, for a lone set or bag
    CTE run from the start, its rows by round in `rounds`, with `all` a view of them) and the
    relations."""

    def __init__(self, run: Loop, info: RunInfo, from_start: bool) -> None:
        self.run_ = run
        self.info = info
        self.from_start = from_start  # the base step runs here too (the states are empty)
        self.settings = run.ctx.settings
        self.started = time.perf_counter()
        self.database = database.of(run.ctx.spark)
        self.con = self.database.cursor()  # the statement's own: its states are its temp tables
        # past its limit DuckDB spills, or fails the attempt where it cannot (a duckdb.Error:
        # Spark continues), rather than the process running out of memory; the limit is set
        # again once the relations are pulled (`duckdb_limit`)
        limit = self.duckdb_limit()
        self.database.limit_memory(self.con, limit)
        self.over_budget = False
        self.names: dict[str, dict[str, str]] = {}  # cte key -> role -> DuckDB table
        self.sources: dict[tuple, exp.Table] = {}  # relation key -> the DuckDB table it is read as
        self.totals: dict[str, int] = {}
        self.deltas: dict[str, int] = {}
        self.branch_sql: dict[tuple[str, int], BranchSQL] = {}  # (cte key, branch index) ->
        self.base_sql: dict[str, list[exp.Query]] = {}  # cte key -> its base branches (from start)
        self.merges: dict[str, Merge] = {}  # cte key -> its merge
        # cte key -> its one-statement iterations, where its rows are kept by round (merges.py)
        self.rounds: dict[str, Rounds] = {}
        self.round = -1  # the round of the current delta (the base step makes round 0)
        # (cte key, live rules) -> the merge's first statement reading those rules' candidates
        self.statements: dict[tuple[str, tuple], str] = {}
        self.row_bytes = {cte.key: row_bytes(run.states[cte.key].schema) for cte in run.group.ctes}
        for cte in run.group.ctes:  # fail early on a head type DuckDB cannot mirror
            for f in run.states[cte.key].schema.fields:
                duck_type(f.dataType)
        self.pull()
        if self.duckdb_limit() != limit:  # a relation registered as Arrow
            self.database.limit_memory(self.con, self.duckdb_limit())
        self.pull_seconds = time.perf_counter() - self.started

    def duckdb_limit(self) -> int:
        """DuckDB's memory limit: the budget less the Arrow relations registered so far."""
        registered = sum(t.nbytes for t in self.info.pulled.values() if not isinstance(t, BaseCopy))
        return max(self.info.budget - registered, DUCKDB_MIN_MEMORY)

    def close(self) -> None:
        import duckdb

        try:  # its temporary tables and registered Arrow tables go with it
            self.con.close()
        except duckdb.Error as error:  # the attempt's outcome stands; the connection is dropped
            log.debug("endgame: closing DuckDB: %s", error)

    def sql(self, statement: exp.Expr | str) -> list[tuple]:
        text = statement if isinstance(statement, str) else statement.sql("duckdb", identify=True)
        return self.con.execute(text).fetchall()

    # -- Spark -> driver

    def to_arrow(self, name: str, df: DataFrame) -> Any:
        # A failing read (malformed data, a lost file) is the statement's error, as the Spark
        # loop would report it; a type Arrow cannot carry only keeps the run on Spark.
        with spark_job(self.run_.group.ctes[0], last_iteration(self.run_)):
            try:
                return df.toArrow()
            except (PySparkTypeError, PySparkValueError, PySparkNotImplementedError) as error:
                raise Untranslatable(f"relation {name} to Arrow: {error}") from None

    def pull_relation(self, key: tuple, name: str, df: DataFrame) -> Any:
        """A relation's rows: a table's as a `BaseCopy` in the session's database, kept for later
        statements (bases.py); any other relation's (a completed CTE's) as Arrow."""
        _phase("pull", "start")
        kind, source = key
        if kind != "table":
            table = self.to_arrow(name, df)
        else:
            table = bases.pulled(self.run_.ctx, source, lambda _plan: self.database.base_copy(
                self.con, self.to_arrow(name, df)))
        _phase("pull", "end", lambda: {  # a base table's copy is a DuckDB table: no chunks
            "arrow_bytes": getattr(table, "nbytes", 0),
            "arrow_chunks": table.column(0).num_chunks if hasattr(table, "column") else None})
        return table

    def load(self, name: str, df: DataFrame, rows: int | None = None,
             schema: StructType | None = None) -> None:
        """`df` as the DuckDB table `name`; `rows`: its row count, if known, and `schema` its
        state's schema. An empty state, such as every state of a fixpoint run from the start, is made
        from the schema alone: no Spark job, and one DuckDB statement rather than an Arrow
        table's three calls (of a statement's 13 ms on the driver before its first iteration,
        the two empty loads took 4.6)."""
        if rows == 0 and schema is not None:
            self.sql(empty_table(name, schema))
            return
        database.load_arrow(self.con, _table(name), self.to_arrow(name, df), temporary=True)

    def pull(self) -> None:
        run = self.run_
        if self.info.relations is None:
            self.info.relations = relations(run)
        for key, (name, df) in self.info.relations.items():
            table = self.info.pulled.get(name)  # pulled by an earlier attempt of this run
            if table is None:
                table = self.pull_relation(key, name, df)
            self.info.pulled[name] = table  # kept for a retry after an over-budget attempt
            if isinstance(table, BaseCopy):
                self.sources[key] = table.table()
            else:
                self.con.register(name, table)  # scanned in place: no copy
                self.sources[key] = _table(name)
        for i, cte in enumerate(run.group.ctes):
            state = run.states[cte.key]
            names = {"all": f"rq_s{i}_all", "delta": f"rq_s{i}_delta", "new": f"rq_s{i}_new",
                     "rounds": f"rq_s{i}_rounds"}
            self.names[cte.key] = names
            rounds = rounds_for(state, names) if self.from_start and len(run.group.ctes) == 1 else None
            if rounds is not None:
                self.rounds[cte.key] = rounds
                for statement in rounds.tables():
                    self.sql(statement)
            else:
                self.load(names["all"], state.all, state.total_rows, state.schema)
                self.load(names["delta"], state.delta, state.delta_rows, state.schema)
            self.totals[cte.key] = state.total_rows
            self.deltas[cte.key] = state.delta_rows
            if isinstance(state, ContributorState):
                names["contrib"] = f"rq_s{i}_contrib"
                self.load(names["contrib"], state.contributors)
        for cte in run.group.ctes:
            for branch in cte.recursive_branches:
                self.branch_sql[(cte.key, branch.index)] = prepare(
                    self.con, run, cte, branch, self.sources, self.names)
            if self.from_start:
                self.base_sql[cte.key] = [
                    prepare(self.con, run, cte, branch, self.sources, self.names).variants[0][1]
                    for branch in cte.base_branches]
            if cte.summing:
                recode_contributors(self.con, cte, self.names[cte.key]["contrib"], {
                    b.index: self.branch_sql[(cte.key, b.index)].contributor_types
                    for b in cte.recursive_branches})
            if cte.key not in self.rounds:
                self.merges[cte.key] = merge_for(run.states[cte.key], cte, self.names[cte.key])

    # -- the loop

    def run(self, iteration: int | None) -> list[IterationStats]:
        """Iterate from the states after `iteration` (None: from the base step) to the fixpoint."""
        _phase("fixpoint", "start")
        stats = self.iterate(iteration)
        _phase("fixpoint", "end", lambda: {
            "relations_est": self.info.base_bytes, "budget": self.info.budget,
            "state_est": sum(self.totals[k] * self.row_bytes[k] for k in self.totals),
            "duckdb_limit": self.sql("SELECT current_setting('memory_limit')")[0][0],
            "duckdb_used": self.sql("SELECT sum(memory_usage_bytes) FROM duckdb_memory()")[0][0]})
        return stats

    def iterate(self, iteration: int | None) -> list[IterationStats]:
        run = self.run_
        stats: list[IterationStats] = []
        if iteration is None:
            iteration = 0
            for cte in run.group.ctes:
                base = self.base_sql[cte.key]
                if base:
                    self.merge(cte, self.start(cte, "base", base.copy))
                else:  # a CTE of a mutual recursion may start from its partners' rows only
                    self.no_change(cte)
                self.report(stats, cte, iteration, self.started)
            if self.outgrown():
                return stats
        while any(self.deltas.values()):
            if recursion_ends(run.group, run.spark_limits, iteration, self.deltas, self.totals):
                return stats
            iteration += 1
            if iteration > self.settings.max_iterations:
                run.fail_iteration_limit(iteration - 1, {c.name: self.deltas[c.key] for c in run.group.ctes})
            started = self.started if not stats else time.perf_counter()
            # every CTE's rules read the deltas of the previous iteration: decided before any merges
            firsts = {cte.key: self.candidates(cte) for cte in run.group.ctes}
            for cte in run.group.ctes:
                first = firsts[cte.key]
                if first is not None:
                    self.merge(cte, first)
                else:
                    self.no_change(cte)
                self.report(stats, cte, iteration, started)
                started = time.perf_counter()
            if self.outgrown():
                return stats
        return stats

    def report(self, stats: list[IterationStats], cte: CTEPlan, iteration: int, started: float) -> None:
        """Record the iteration and tell the statement's progress callback at once, so that a
        long driver fixpoint shows its iterations as they run. Should the attempt then be dropped
        (a DuckDB error), the Spark loop reports the iterations it runs again after these."""
        stat = IterationStats(
            cte=cte.name, iteration=iteration, delta_rows=self.deltas[cte.key],
            total_rows=self.totals[cte.key], seconds=time.perf_counter() - started,
            join_strategy="driver", ran_on="driver",
            pull_seconds=self.pull_seconds if not stats else 0.0,
        )
        stats.append(stat)
        if self.run_.ctx.on_iteration:
            self.run_.ctx.on_iteration(stat)

    def outgrown(self) -> bool:
        """Whether the states outgrew the budgets with the last iteration (which is complete,
        so Spark can take over from it): the bytes they hold, or a delta over `maxDeltaRows`."""
        limit = self.settings.endgame_max_delta_rows
        state = sum(self.totals[key] * self.row_bytes[key] for key in self.totals)
        self.over_budget = (bool(limit and any(d > limit for d in self.deltas.values()))
                            or held_bytes(state, self.info.base_bytes) > self.info.budget)
        return self.over_budget and any(self.deltas.values())

    def candidates(self, cte: CTEPlan) -> str | None:
        """The CTE's candidates of this iteration, as the statement that starts its merge (see
        `start`); None when no rule runs."""
        live = tuple(
            (branch.index, i)
            for branch in cte.recursive_branches
            for i, (variant, _) in enumerate(self.branch_sql[(cte.key, branch.index)].variants)
            # a rule that reads an empty delta derives nothing
            if all(role != DELTA or self.deltas[ref.cte] for ref, role in zip(branch.refs, variant))
        )
        if not live:
            return None
        return self.start(cte, live, lambda: [self.branch_sql[(cte.key, b)].variants[i][1] for b, i in live])

    def start(self, cte: CTEPlan, rules: Any, parts: Callable[[], list[exp.Query]]) -> str:
        """The statement that starts the CTE's merge of the union of the candidate queries
        `parts()` (rendered once per set of `rules`, not once per iteration). A CTE alone in its
        group: the merge's first statement reading them in place (the whole merge, where its rows
        are kept by round: `merges.Rounds`). In a mutual recursion every
        CTE's candidates read the previous iteration's deltas, which the merges replace, so they
        are made into the `new` tables first (here) and the merge starts as written."""
        statement = self.statements.get((cte.key, rules))
        if statement is None:
            union = functools.reduce(lambda a, b: exp.union(a, b, distinct=False), parts())
            new = self.names[cte.key]["new"]
            if cte.key in self.rounds:
                statement = self.rounds[cte.key].step(union)
            elif len(self.run_.group.ctes) == 1:
                statement = self.merges[cte.key].reading(union)
            else:
                statement = exp.Create(this=_table(new), kind="TABLE", replace=True,
                                       properties=database.own(), expression=union).sql("duckdb", identify=True)
            self.statements[(cte.key, rules)] = statement
        if len(self.run_.group.ctes) == 1:
            return statement
        self.sql(statement)
        return self.merges[cte.key].statements[0]

    def no_change(self, cte: CTEPlan) -> None:
        if cte.key in self.rounds:
            self.round += 1  # a round without rows
        else:
            self.sql(exp.Delete(this=_table(self.names[cte.key]["delta"])))
        self.deltas[cte.key] = 0

    def merge(self, cte: CTEPlan, first: str) -> None:
        """Fold the candidates into the state: the merge's statements, `first` in place of the
        first (it reads the candidates)."""
        if cte.key in self.rounds:  # one statement, reading the delta's round
            self.deltas[cte.key] = self.con.execute(first, [self.round]).fetchall()[0][0]
            self.totals[cte.key] += self.deltas[cte.key]
            self.round += 1
            return
        merge = self.merges[cte.key]
        reported = [self.sql(statement) for statement in [first, *merge.statements[1:]]]
        # the INSERT of the delta into `all` reports its rows, the DELETE before it the rows of
        # `all` it replaces
        inserted = reported[-1][0][0]
        self.deltas[cte.key] = inserted
        self.totals[cte.key] += inserted - (reported[-2][0][0] if merge.replaces_groups else 0)

    # -- driver -> Spark

    def write_back(self) -> None:
        _phase("write_back", "start")
        run = self.run_
        for cte in run.group.ctes:
            state = run.states[cte.key]
            names = self.names[cte.key]
            rows = self.arrow(names["all"], state.columns)
            all_df = self.state_df(cte, rows, state.schema)
            contributors = None
            if isinstance(state, ContributorState):
                schema = state.contributors.schema
                contributors = self.to_spark(self.arrow(names["contrib"], schema.fieldNames()), schema)
            state.restore(all_df, None, 0, self.totals[cte.key], contributors, rows=rows)
        _phase("write_back", "end")

    def state_df(self, cte: CTEPlan, rows: Any, schema: StructType) -> DataFrame:
        """The finished state of `cte` (its Arrow `rows`) on Spark."""
        return self.to_spark(rows, schema)

    def hand_back(self) -> None:
        """Put the states of the last complete iteration back on Spark, delta included, placed
        by their keys and checkpointed as the Spark loop keeps its states, for it to continue."""
        run = self.run_
        for cte in run.group.ctes:
            state = run.states[cte.key]
            names = self.names[cte.key]
            if cte.key in self.rounds:
                self.sql(self.rounds[cte.key].delta(self.round))
            with spark_job(cte, last_iteration(run)):
                all_df = self.placed(state, names["all"], state.schema)
                delta = self.placed(state, names["delta"], state.schema)
                contributors = None
                if isinstance(state, ContributorState):
                    contributors = self.placed(state, names["contrib"], state.contributors.schema)
            state.restore(all_df, delta, self.deltas[cte.key], self.totals[cte.key], contributors)

    def placed(self, state: RelationState, table: str, schema: StructType) -> DataFrame:
        """A DuckDB table on Spark, hash-partitioned by the state's key columns it has (as the
        Spark loop places its states) and checkpointed, so the next iteration joins it as such."""
        df = self.to_spark(self.arrow(table, schema.fieldNames()), schema)
        key = [c for c in state.key if c in schema.fieldNames()]
        placed = df.repartition(state.partitions, *key) if key else df.coalesce(1)
        return placed.localCheckpoint(eager=True)

    def to_spark(self, table: Any, schema: StructType) -> DataFrame:
        """The Arrow `table` as a DataFrame of at most the statement's partitions. Spark makes a
        partition of every `maxRecordsPerBatch` rows it is handed (10,000 by default), and every
        job over the DataFrame then runs a task per partition: the 546,700 rows of SSSP at RMAT
        2^20 were 55 tasks of the answer's `toArrow` on 2 cores."""
        spark = self.run_.ctx.spark
        rows = -(-table.num_rows // self.run_.ctx.partitions)  # per partition, rounded up
        if rows <= ARROW_BATCH_ROWS:  # within Spark's default: no conf to read or set
            return spark.createDataFrame(table, schema)
        with overridden_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": str(rows)}):
            return spark.createDataFrame(table, schema)

    def arrow(self, table: str, columns: list[str]) -> Any:
        select = exp.select(*[exp.column(c, quoted=True) for c in columns]).from_(_table(table))
        rel = self.con.sql(select.sql("duckdb", identify=True))
        fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table  # duckdb 2 / 1.x
        return fetch()


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name, quoted=True))
