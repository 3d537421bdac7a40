"""A materialized view's refresh after appends, continued on the driver (`executor/strategies/seeded.py`
says why continuing from the stored fixpoint is sound).

When the stored state and the base tables fit the driver budget, no Spark job runs at all but
the write of the new version: DuckDB reads the stored state straight from its parquet files, each
appended table's new rows from the files added, and the whole table from all its files into a
driver copy kept for later statements (`bases.grown`), unless a copy kept of the table as it
was at the last refresh is there to grow by the new rows (at RMAT 2^20 the whole read was the
largest part of a warm refresh), derives the first delta (every branch reading an appended
table, with that table read as its new rows and its references as the whole stored state),
merges it against the stored state and runs the rest of the fixpoint as the endgame does. On
Spark, the same start cost a shuffle and a checkpoint of the stored state and a pull of the
tables (RMAT 2^16 SSSP, 0.1% appends: 5.8 s against a full recompute's 2.0 s).

After rows were removed or rewritten (a delete, an update), the same reads start a re-derivation
instead: where the tables' files at the last refresh are kept, from the removed rows alone
(`_SeededDriver.from_removed`: the stored rows they could have derived reset, then re-derived);
else the stored rows that the tables as they are still derive, grounded from the base rows up,
then the fixpoint continued from them (`_SeededDriver.rederived`). It runs on the driver only.

Anything it cannot do (a format DuckDB does not read here, a branch it cannot translate, a state
over the budget) leaves the run as it was, and the Spark path starts it instead: from the stored
state after appends, from the base step (a full recompute) after removals."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import PySparkException
from sqlglot import exp

from recsql.executor.endgame import database
from recsql.executor.endgame.decide import RunInfo, available_memory, driver_budget, held_bytes, row_bytes
from recsql.executor.endgame.driver import _Driver, finish_on_driver
from recsql.executor.endgame.driver_sql import Untranslatable
from recsql.executor.endgame.parquet_files import as_written, local
from recsql.executor.endgame.translate import branch_relations, duck_type, prepare
from recsql.executor.loop.protocols import Loop
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
from recsql.executor.state import bases
from recsql.planner.model import CTEPlan
from recsql.planner.names import TableName

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeedFiles:
    """What DuckDB reads a seeded run's start from: per CTE key the stored state's parquet files
    and their rows, per changed table (all parquet) its files now, and per appended table the
    files added since. `rederive`: rows were removed or rewritten, so the run re-derives what
    still stands instead (`_SeededDriver.rederived`); `added` is then empty. `before`, where
    the changed tables' files at the last refresh are kept: those files, per changed table, so
    that the re-derivation starts from the removed rows alone (`_SeededDriver.from_removed`)."""

    states: dict[str, list[str]]
    rows: dict[str, int]
    tables: dict[TableName, list[str]]
    added: dict[TableName, list[str]]
    rederive: bool = False
    before: dict[TableName, list[str]] = field(default_factory=dict)
    # per changed table, its files with their sizes and mtimes (`bases.file_identity`) at the
    # last refresh (None where they did not only grow since) and now: the table's driver copy
    # is kept for later statements, grown from a kept copy of the table as it was (`bases.grown`)
    identities: dict[TableName, tuple[list[tuple[Any, ...]] | None, list[tuple[Any, ...]]]] = \
        field(default_factory=dict)
    # a local directory where the finished states are written as parquet files (`staged_file`),
    # which Spark then reads: the refresh writes its new version from them (hard links), and
    # no Spark DataFrame is made of the rows (`createDataFrame` of SSSP's 546,118 rows at RMAT
    # 2^20 took 0.66-0.72 s)
    staging: str | None = None


def staged_file(staging: str, key: str) -> str:
    """The parquet file of CTE `key`'s finished state in `staging` (`SeedFiles.staging`)."""
    return os.path.join(staging, f"state-{hashlib.sha256(key.encode()).hexdigest()[:16]}.parquet")


def continue_on_driver(run: Loop, info: RunInfo, files: SeedFiles) -> bool:
    """Run the seeded group wholly on the driver; False (run untouched) if it cannot."""
    settings = run.ctx.settings
    if not settings.endgame_enabled or any(c.summing for c in run.group.ctes):
        return False
    # the stored state alone over the budget: not even read (the tables are checked once read)
    info.budget = driver_budget(settings.endgame_driver_memory, available_memory())
    state = sum(files.rows[key] * row_bytes(s.schema) for key, s in run.states.items())
    if held_bytes(state, 0) > info.budget:
        return False
    return finish_on_driver(run, info, None, lambda: _SeededDriver(run, info, files))


class _SeededDriver(_Driver):
    """The endgame's driver, its states loaded from the stored fixpoint and its first delta made
    from the appended rows (`start_from_seed`) rather than by the base step; or, when rows were
    removed or rewritten, its states re-derived from what still stands (`rederived`)."""

    def __init__(self, run: Loop, info: RunInfo, files: SeedFiles) -> None:
        self.files = files
        self.appended = {("table", table): f"rq_appended_{i}" for i, table in enumerate(files.added)}
        self.stored: dict[str, str] = {}  # cte key -> the stored state's table (re-deriving)
        self.grounding = False  # re-deriving: candidates are kept only where they are stored rows
        super().__init__(run, info, from_start=False)

    def pull_relation(self, key: tuple, name: str, df: Any) -> Any:
        table = key[1] if key[0] == "table" else None
        if table not in self.files.tables:
            return super().pull_relation(key, name, df)
        # the changed table's new rows, and the table whole as a driver copy kept for later
        # statements, straight from its files (no Spark job); or a kept copy of the table as
        # it was at the last refresh, grown by the new rows
        width = row_bytes(df.schema)
        new_rows = None
        if key in self.appended:
            self.sql(_from_files(self.appended[key], self.files.added[table], df.schema))
            new_rows = exp.select("*").from_(_table(self.appended[key]))
        before, now = self.files.identities.get(table, (None, None))

        def grow(old: database.BaseCopy) -> database.BaseCopy | None:
            return None if new_rows is None else self.database.grown(self.con, old, new_rows, width)

        def whole(_plan: Any) -> database.BaseCopy:
            return self.database.copy_of(self.con, _select_files(self.files.tables[table], df.schema), width)

        if now is None:
            return whole(None)
        return bases.grown(self.run_.ctx, table, before, now, grow, whole)

    def state_df(self, cte: CTEPlan, rows: Any, schema: Any) -> Any:
        """The finished state written as a parquet file of `SeedFiles.staging` and read back by
        Spark (lazily: no rows cross to the JVM until a job reads them); else as the endgame
        hands it over. Spark must list the file where it was written (a Spark Connect server
        elsewhere does not)."""
        staging = self.files.staging
        written = None if staging is None else as_written(rows, schema)
        if staging is None or written is None:
            return super().state_df(cte, rows, schema)
        import pyarrow.parquet as pq

        path = staged_file(staging, cte.key)
        pq.write_table(written, path, compression="snappy", use_dictionary=False)
        try:
            with quiet_pyspark_error_logs():
                df = self.run_.ctx.spark.read.schema(schema).parquet(path)
                if [local(f) for f in df.inputFiles()] == [path]:
                    log.info("refresh: the state of %s staged as a parquet file", cte.name)
                    return df
        except PySparkException as error:
            log.debug("refresh: the staged state is not read back: %s", error)
        os.remove(path)
        return super().state_df(cte, rows, schema)

    def pull(self) -> None:
        super().pull()
        run = self.run_
        relation_bytes = 0
        for key, (_name, df) in (self.info.relations or {}).items():
            rows = self.sql(exp.select("count(*)").from_(self.sources[key].copy()))[0][0]
            relation_bytes += rows * row_bytes(df.schema)
        self.info.base_bytes = relation_bytes
        stored = 0
        for i, cte in enumerate(run.group.ctes):
            state = run.states[cte.key]
            # re-deriving, the stored rows are what the states may keep; else they are the states
            table = f"rq_s{i}_stored" if self.files.rederive else self.names[cte.key]["all"]
            self.sql(_from_files(table, self.files.states[cte.key], state.schema,
                                 insert=not self.files.rederive))
            rows = self.sql(exp.select("count(*)").from_(_table(table)))[0][0]
            stored += rows * self.row_bytes[cte.key]
            if self.files.rederive:
                self.stored[cte.key] = table
                self.base_sql[cte.key] = [
                    prepare(self.con, run, cte, branch, self.sources, self.names).variants[0][1]
                    for branch in cte.base_branches]
            else:
                self.totals[cte.key] = rows
        if held_bytes(stored, relation_bytes) > self.info.budget:
            raise Untranslatable("the stored state and the tables exceed the driver budget")
        clock = time.perf_counter()
        relations = self.info.relations or {}
        for i, (changed, files) in enumerate(self.files.before.items()):
            # the table as it was, and the rows removed from it and added to it since (as sets:
            # a row removed while a copy of it stays derives what it derived; EXCEPT ALL, which
            # DuckDB numbers the copies for, took five times as long)
            now = self.sources[("table", changed)]
            schema = relations[("table", changed)][1].schema
            self.sql(_from_files(f"rq_before_{i}", files, schema))
            before = _table(f"rq_before_{i}")
            for name, left, right in ((f"rq_removed_{i}", before, now), (f"rq_added_{i}", now, before)):
                self.sql(exp.Create(this=_table(name), kind="TABLE", properties=database.own(),
                                    expression=exp.except_(exp.select("*").from_(left.copy()),
                                                           exp.select("*").from_(right.copy()),
                                                           distinct=True)))
        if self.files.before:
            log.info("refresh: the change found %.2f s", time.perf_counter() - clock)

    def iterate(self, iteration: int | None) -> list:
        """The first delta from the appended rows, then the loop as the endgame runs it."""
        if self.files.before:
            return self.from_removed()
        if self.files.rederive:
            return self.rederived()
        firsts = {cte.key: self.seeded_candidates(cte) for cte in self.run_.group.ctes}
        return self.first_then_loop(firsts, 0, [])

    def first_then_loop(self, firsts: dict[str, str | None], iteration: int, stats: list) -> list:
        """Merge each CTE's first candidates as iteration `iteration`, then loop."""
        started = self.started
        for cte in self.run_.group.ctes:
            first = firsts[cte.key]
            if first is not None:
                self.merge(cte, first)
            else:
                self.no_change(cte)
            self.report(stats, cte, iteration, started)
            started = time.perf_counter()
        if self.outgrown():
            return stats
        # the loop's first iteration reports its own time, the pull reported with iteration 0
        self.started, self.pull_seconds = time.perf_counter(), 0.0
        return stats + super().iterate(iteration)

    def rederived(self) -> list:
        """After rows were removed or rewritten: first the stored rows that the tables as they
        are still derive, found as the fixpoint is, from the base rows up, with every candidate
        kept only where it is a stored row (so each row kept has a derivation from the rows that
        remain; none is kept by a cycle of stored rows deriving each other); then, from those
        rows, one step of every branch (base and recursive, every reference read whole) as the
        first delta, and the loop. Started from rows the new tables derive, with every derivation
        from them made once, the loop ends at the fixpoint of the new tables: a full recompute's
        answer (for set and min/max recursion, which are monotone in their own rows)."""
        self.grounding = True
        stats = super().iterate(None)
        self.grounding = False
        if self.over_budget:  # Spark would continue without the filter, from a filtered step
            raise Untranslatable("re-deriving the stored rows outgrew the driver budget")
        whole = {key: {**names, "delta": names["all"]} for key, names in self.names.items()}
        firsts: dict[str, str | None] = {}
        for cte in self.run_.group.ctes:
            def parts(cte: CTEPlan = cte) -> list[exp.Query]:
                return [*self.base_sql[cte.key],
                        *(prepare(self.con, self.run_, cte, branch, self.sources, whole).variants[0][1]
                          for branch in cte.recursive_branches)]
            firsts[cte.key] = self.start(cte, ("rederived",), parts)
        self.started = time.perf_counter()
        return self.first_then_loop(firsts, max((s.iteration for s in stats), default=0) + 1, stats)

    def from_removed(self) -> list:
        """After rows were removed (or rewritten), work proportional to the change: reset every
        stored row that a removed row could have derived at its value (for min/max, the key's
        extremum; for a set, the row), then every stored row that a reset row could have derived
        at its value, until none is left (DRed's over-delete, narrowed to derivations that reach
        the stored value, the only ones a winner can come from); the rows that stay each keep a
        derivation of their value that reads only rows that stay and tables' rows that remain.
        Then the first delta: every branch's candidates for the reset keys, derived from the
        rows that stay and the tables as they are, with what the added rows derive from them;
        and the loop, which ends at the new tables' fixpoint (the stored rows that stay are at
        values the new tables achieve, and no derivation from them is missed)."""
        run, ctes = self.run_, self.run_.group.ctes
        tables = list(self.files.before)
        clock = time.perf_counter()
        reset = {cte.key: f"rq_s{i}_reset" for i, cte in enumerate(ctes)}
        fresh = {cte.key: f"rq_s{i}_fresh" for i, cte in enumerate(ctes)}
        for cte in ctes:
            for name in (reset[cte.key], fresh[cte.key]):
                self.sql(_like(name, self.stored[cte.key]))
        stored_names = {k: {**n, "all": self.stored[k], "delta": self.stored[k]} for k, n in self.names.items()}
        # derivations reading a removed row (each changed table in turn; the others as they were)
        candidates = {cte.key: [
            prepare(self.con, run, cte, branch, self._sources(tables, i, "removed"), stored_names).variants[0][1]
            for branch in cte.branches for i, table in enumerate(tables)
            if any(k == ("table", table) for k, _ in _relations(run, branch))] for cte in ctes}
        grew, rounds = True, 0
        while grew:
            rounds += 1
            grew = False
            # every CTE's candidates read the fresh rows of the round before: made before any moves
            for i, cte in enumerate(ctes):
                self._candidates(cte, candidates[cte.key], f"rq_s{i}_candidates")
            for i, cte in enumerate(ctes):
                rows = self._reset_by(cte, f"rq_s{i}_candidates", reset[cte.key], fresh[cte.key])
                grew = grew or rows > 0
            # derivations reading a freshly reset row, the tables as they were
            closure = {k: {**n, "all": self.stored[k], "delta": fresh[k]} for k, n in self.names.items()}
            candidates = {cte.key: [
                query for branch in cte.recursive_branches
                for _, query in prepare(self.con, run, cte, branch, self._sources(tables, None, "before"),
                                        closure).variants] for cte in ctes}
        log.info("refresh: reset closure %d round(s) %.2f s", rounds, time.perf_counter() - clock)
        clock = time.perf_counter()
        reset_rows = 0
        for cte in ctes:
            names = self.names[cte.key]
            keep = exp.select("*").from_(_table(self.stored[cte.key]).as_("s")).where(
                exp.not_(_matching(reset[cte.key], "s", cte.group_key)))
            self.sql(exp.insert(keep, _table(names["all"])))
            self.totals[cte.key] = self.sql(exp.select("count(*)").from_(_table(names["all"])))[0][0]
            reset_rows += self.sql(exp.select("count(*)").from_(_table(reset[cte.key])))[0][0]
        log.info("refresh: %d stored row(s) reset after removed rows", reset_rows)
        # the first delta: the reset keys derived again, and what the added rows derive
        kept = {k: {**n, "delta": n["all"]} for k, n in self.names.items()}
        firsts: dict[str, str | None] = {}
        for cte in ctes:
            columns = self.run_.states[cte.key].columns
            parts: list[exp.Query] = [_within(query, columns, reset[cte.key], cte.group_key) for query in [
                *(prepare(self.con, run, cte, b, self.sources, kept).variants[0][1] for b in cte.branches)]]
            parts += [prepare(self.con, run, cte, branch, self._sources(tables, i, "added"), kept).variants[0][1]
                      for branch in cte.branches for i, table in enumerate(tables)
                      if any(k == ("table", table) for k, _ in _relations(run, branch))]
            firsts[cte.key] = self.start(cte, ("from removed",), parts.copy) if parts else None
        log.info("refresh: kept rows and first delta prepared %.2f s", time.perf_counter() - clock)
        self.started = time.perf_counter()
        return self.first_then_loop(firsts, 0, [])

    def _sources(self, tables: list[TableName], changed: int | None, role: str) -> dict[tuple, exp.Table]:
        """The relations with every changed table as it was at the last refresh, but table
        number `changed`, read as its `role` rows (removed or added); None: all as they were."""
        sources = dict(self.sources)
        for i, table in enumerate(tables):
            sources[("table", table)] = _table(f"rq_{role if i == changed else 'before'}_{i}")
        return sources

    def _candidates(self, cte: CTEPlan, candidates: Sequence[exp.Query], table: str) -> None:
        """The union of `candidates` as the temporary table `table`, in the CTE's columns."""
        if not candidates:
            self.sql(_like(table, self.stored[cte.key]))
            return
        columns = self.run_.states[cte.key].columns
        union = functools.reduce(lambda a, b: exp.union(a, b, distinct=False), candidates).subquery(exp.TableAlias(
            this=exp.to_identifier("c"), columns=[exp.to_identifier(c, quoted=True) for c in columns]))
        self.sql(exp.Create(this=_table(table), kind="TABLE", replace=True,
                            properties=database.own(), expression=exp.select("*").from_(union)))

    def _reset_by(self, cte: CTEPlan, candidates: str, reset: str, fresh: str) -> int:
        """Move into `reset` (and make `fresh`) the stored rows not yet reset that a row of
        `candidates` matches on its key and aggregated values; their number."""
        self.sql(exp.Delete(this=_table(fresh)))
        matched = cte.group_key + [c.name for c in cte.aggregates]
        hit = exp.select("s.*").from_(_table(self.stored[cte.key]).as_("s")).where(exp.and_(
            _matching(candidates, "s", matched), exp.not_(_matching(reset, "s", cte.group_key))))
        self.sql(exp.insert(hit, _table(fresh)))
        rows = self.sql(exp.insert(exp.select("*").from_(_table(fresh)), _table(reset)))[0][0]
        return int(rows)

    def start(self, cte: CTEPlan, rules: Any, parts: Callable[[], list[exp.Query]]) -> str:
        if not self.grounding:
            return super().start(cte, rules, parts)
        stored = exp.select(*(exp.column(c, quoted=True) for c in self.run_.states[cte.key].columns)) \
            .from_(_table(self.stored[cte.key]))
        return super().start(cte, ("stored rows", rules), lambda: [
            exp.select("*").from_(exp.intersect(part, stored.copy(), distinct=True).subquery("rq_kept"))
            for part in parts()])

    def seeded_candidates(self, cte: CTEPlan) -> str | None:
        """What each branch of `cte` derives once per appended table it reads, that table read
        as its new rows and every reference as the whole stored state (a derivation from new
        rows of two tables is found twice, which a set or an extremum absorbs)."""
        whole = {key: {**names, "delta": names["all"]} for key, names in self.names.items()}
        parts: list[exp.Query] = []
        for branch in cte.branches:
            for key, appended in self.appended.items():
                if not any(k == key for k, _ in _relations(self.run_, branch)):
                    continue
                sources = {**self.sources, key: exp.Table(this=exp.to_identifier(appended, quoted=True))}
                parts.append(prepare(self.con, self.run_, cte, branch, sources, whole).variants[0][1])
        if not parts:
            return None
        return self.start(cte, ("seeded",), parts.copy)


def _relations(run: Loop, branch: Any) -> list:
    return list(branch_relations(run.ctx.env, branch))


def _from_files(table: str, files: list[str], schema: Any, insert: bool = False) -> exp.Expr:
    """The statement that loads the parquet `files` as the temporary table `table` (or, with
    `insert`, into it), in `schema`'s columns and types."""
    select = _select_files(files, schema)
    target = exp.to_identifier(table, quoted=True)
    if insert:
        return exp.insert(select, exp.Table(this=target))
    return exp.Create(this=exp.Table(this=target), kind="TABLE", expression=select,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def _select_files(files: list[str], schema: Any) -> exp.Select:
    paths = exp.Array(expressions=[exp.Literal.string(_local(f)) for f in files])
    return exp.select(*(
        exp.cast(exp.column(f.name, quoted=True), duck_type(f.dataType)).as_(f.name, quoted=True)
        for f in schema.fields)).from_(exp.func("read_parquet", paths))


def _local(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path




def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _like(name: str, table: str) -> exp.Create:
    """An empty temporary table `name` with `table`'s columns."""
    return exp.Create(this=_table(name), kind="TABLE", replace=True, properties=database.own(),
                      expression=exp.select("*").from_(_table(table)).limit(0))


def _matching(table: str, alias: str, columns: list[str]) -> exp.Exists:
    """EXISTS a row of `table` equal (NULL to NULL) to row `alias` on `columns`."""
    equal = [exp.NullSafeEQ(this=exp.column(c, "m", quoted=True), expression=exp.column(c, alias, quoted=True))
             for c in columns]
    query = exp.select("1").from_(_table(table).as_("m"))
    if equal:
        query = query.where(exp.and_(*equal))
    return exp.Exists(this=query)


def _within(query: exp.Query, columns: list[str], reset: str, key: list[str]) -> exp.Select:
    """The candidates of `query` (in `columns`) for the keys of `reset` only."""
    named = query.subquery(exp.TableAlias(this=exp.to_identifier("c"),
                                          columns=[exp.to_identifier(c, quoted=True) for c in columns]))
    return exp.select("*").from_(named).where(_matching(reset, "c", key))


__all__ = ["SeedFiles", "continue_on_driver", "staged_file"]
