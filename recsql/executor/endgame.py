"""Endgame (Afrati et al. section 8): once a fixpoint's delta is tiny, an iteration on Spark costs
more than its work. When the state and the base rows fit the driver budget, the rest of the
fixpoint runs on the driver, in an in-process DuckDB, with the Spark states' exact semantics.

`applies(run)` decides (cheaply: the base relations are counted once per run, and only once the
delta is small); `finish_on_driver(run, iteration)` pulls the states and every relation the
recursive branches read as Arrow, runs the remaining semi-naive iterations in DuckDB (same delta
rules, same head types, same set / min-max / contributor-sum / bag merges, same sum tolerance,
same maxIterations error) and puts the results back as the states' `all`. It returns False and
leaves the run untouched when a branch cannot be translated, DuckDB fails on it, or the driver
fixpoint outgrows the budgets (then the Spark loop simply continues).

When it applies (all settings `spark.recsql.endgame.*`):
* every CTE's delta is at most `maxDeltaRows`;
* the state rows plus the rows of the relations the recursive branches read are at most
  `maxDriverRows`;
* the fixpoint is in its tail: the group's delta did not grow in the last Spark iteration, or the
  whole problem (state plus relations) is no larger than `maxDeltaRows`. So the iteration-0 delta
  of a single-source query on a large graph (one row, about to grow) stays on Spark; and should
  the delta grow past `maxDeltaRows` on the driver after all, the driver work is dropped and Spark
  runs those iterations (and the endgame is tried again once they are behind).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)
from sqlglot import exp

from recsql.errors import RecSQLExecutionError
from recsql.executor.driver_sql import Untranslatable, check_forms, check_types, strict_casts
from recsql.executor.loop import Loop
from recsql.executor.state import (
    CONTRIB,
    BagState,
    ContributorState,
    ExtremaState,
    RelationState,
    SetState,
)
from recsql.executor.stats import IterationStats
from recsql.planner.model import DELTA, Branch, CTEPlan
from recsql.settings import Settings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # driver attempts per run that outgrew the budget before the endgame gives up


class OverBudget(Exception):
    """The driver fixpoint outgrew the budgets after `iterations` iterations."""

    def __init__(self, iterations: int) -> None:
        super().__init__(iterations)
        self.iterations = iterations


@dataclass
class _RunInfo:
    """What the endgame remembers about one GroupRun."""

    disabled: bool = False
    attempts: int = 0
    not_before: int = 0  # no attempt before the Spark loop has completed this iteration
    relations: dict[tuple, tuple[str, DataFrame]] | None = None  # key -> (DuckDB name, df)
    base_rows: int | None = None
    arrow: dict[str, Any] = field(default_factory=dict)  # DuckDB name -> pulled Arrow table


class Driver:
    """The runner that takes the rest of a fixpoint to the driver (see `fixpoint.RUNNERS`)."""

    def __init__(self, run: Loop) -> None:
        self.loop = run
        self.info = _RunInfo()

    def run(self, iteration: int) -> int | None:
        """Finish the fixpoint on the driver; its last iteration, or None (run untouched)."""
        if not applies(self.loop, self.info) or not finish_on_driver(self.loop, self.info, iteration):
            return None
        return _last_iteration(self.loop)


# -- deciding -------------------------------------------------------------------------------


def applies(run: Loop, info: _RunInfo) -> bool:
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
    if _last_iteration(run) < info.not_before:
        return False
    if not _translatable(run, info):
        return False
    base_rows = _base_rows(run, info)  # Spark jobs, but only once per run
    if base_rows is None:
        return False
    state_rows = sum(s.total_rows for s in states)
    return fits_driver(delta_rows, state_rows, base_rows, _not_growing(run), settings)


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


def _translatable(run, info: _RunInfo) -> bool:
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


def _last_iteration(run) -> int:
    return max((s.iteration for s in run.stats), default=0)


def _not_growing(run) -> bool:
    """The group's delta did not grow in the last Spark iteration (never true at iteration 0)."""
    per_iteration: dict[int, int] = {}
    for s in run.stats:
        per_iteration[s.iteration] = per_iteration.get(s.iteration, 0) + s.delta_rows
    last = max(per_iteration, default=0)
    if last < 1 or last - 1 not in per_iteration:
        return False
    return per_iteration[last] <= per_iteration[last - 1]


def _base_rows(run, info: _RunInfo) -> int | None:
    if info.base_rows is None:
        try:
            info.relations = _relations(run)
            info.base_rows = sum(df.count() for _, df in info.relations.values())
        except Exception as error:  # an unresolvable relation: the endgame does not apply
            log.debug("endgame: cannot size the relations: %s", error)
            info.disabled = True
            return None
    return info.base_rows


def _relations(run) -> dict[tuple, tuple[str, DataFrame]]:
    """Every relation (other than the group's own CTEs) a recursive branch reads, by a key that
    identifies it across branches, with the DuckDB table name it gets and its DataFrame."""
    found: dict[tuple, tuple[str, DataFrame]] = {}
    for cte in run.group.ctes:
        for branch in cte.recursive_branches:
            for key, _table in _branch_relations(run, branch):
                if key not in found:
                    found[key] = (f"rq_rel_{len(found)}", _relation_df(run, branch, key))
    return found


def _branch_relations(run, branch: Branch, select: exp.Expr | None = None):
    """(key, exp.Table) of each relation of `branch` (or of `select`, a copy of its SELECT) that
    must be supplied to DuckDB; references to the group's CTEs and local CTEs are skipped."""
    select = branch.select if select is None else select
    refs = {r.binding for r in branch.refs}
    local = {c.alias_or_name.lower() for c in select.find_all(exp.CTE)}
    for table in list(select.find_all(exp.Table)):
        if isinstance(table.this, exp.Placeholder):
            binding = table.this.name
            if binding in refs:
                continue
            base = next((b for b in branch.bases if b.binding == binding), None)
            if base is not None:
                yield ("base", base.table.lower(), tuple(c.lower() for c in base.columns)), table
            elif binding in run.ctx.env:
                yield ("env", binding), table
            else:
                raise Untranslatable(f"unbound relation {{{binding}}}")
        elif isinstance(table.this, exp.Identifier):
            if not table.args.get("db") and table.name.lower() in local:
                continue
            bare = table.copy()
            bare.set("alias", None)
            yield ("table", bare.sql("rasql").lower()), table
        else:
            raise Untranslatable(f"relation {table.sql('rasql')}")


def _relation_df(run, branch: Branch, key: tuple) -> DataFrame:
    kind = key[0]
    if kind == "base":
        # The driver needs the rows, not Spark's placement: pre-partitioning a base table the
        # Spark loop never joined would cost a shuffle and a checkpoint for nothing.
        base = next(b for b in branch.bases if (b.table.lower(), tuple(c.lower() for c in b.columns)) == key[1:])
        partitioned = run.ctx.bases.get(key[1:])
        return partitioned if partitioned is not None else run.ctx.spark.table(base.table)
    if kind == "env":
        return run.ctx.env[key[1]]
    return run.ctx.spark.table(key[1])


# -- finishing ------------------------------------------------------------------------------


def finish_on_driver(run: Loop, info: _RunInfo, iteration: int) -> bool:
    """Run the rest of the fixpoint on the driver; False (run unchanged) if it cannot."""
    import duckdb  # only here: `import recsql` stays light

    info.attempts += 1
    driver = None
    try:
        driver = _Driver(run, info)
        stats = driver.run(iteration)
        driver.write_back()
    except RecSQLExecutionError:
        raise  # maxIterations: the same error Spark would raise
    except OverBudget as over:
        log.info("endgame: driver fixpoint outgrew the budget after %d iteration(s); back to Spark",
                 over.iterations)
        info.not_before = iteration + over.iterations + 1
        info.disabled = info.attempts >= MAX_ATTEMPTS
        return False
    except (Untranslatable, duckdb.Error) as error:  # Spark continues (and, for an error
        # Spark shares, such as an overflow, raises it itself); anything else is a bug
        log.info("endgame: staying on Spark: %s: %s", type(error).__name__, error)
        info.disabled = True
        info.arrow.clear()
        return False
    finally:
        if driver is not None:
            driver.close()
    info.arrow.clear()
    for stat in stats:
        run.stats.append(stat)
        if run.ctx.on_iteration:
            run.ctx.on_iteration(stat)
    return True


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _arrow(con, sql: str):
    rel = con.sql(sql)
    fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table  # duckdb 2 / 1.x
    return fetch()


def _duck_type(dtype: DataType) -> str:
    if isinstance(dtype, DecimalType):
        return f"DECIMAL({dtype.precision}, {dtype.scale})"
    for spark_type, name in _TYPES:
        if isinstance(dtype, spark_type):
            return name
    raise Untranslatable(f"head type {dtype.simpleString()}")


_TYPES = (
    (ByteType, "TINYINT"), (ShortType, "SMALLINT"), (IntegerType, "INTEGER"), (LongType, "BIGINT"),
    (FloatType, "FLOAT"), (DoubleType, "DOUBLE"), (StringType, "VARCHAR"),
    (BooleanType, "BOOLEAN"), (DateType, "DATE"),
)
_INTEGRAL_DUCK = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT"}


class _Driver:
    def __init__(self, run, info: _RunInfo) -> None:
        import duckdb

        self.run_ = run
        self.info = info
        self.settings = run.ctx.settings
        self.started = time.perf_counter()
        self.con = duckdb.connect()
        self.names: dict[str, dict[str, str]] = {}  # cte key -> role -> DuckDB table
        self.totals: dict[str, int] = {}
        self.deltas: dict[str, int] = {}
        # (cte, branch index) -> (DuckDB SQL with references unbound, wrapper, contributor types)
        self.branch_sql: dict[tuple[str, int], tuple[str, str, list[str]]] = {}
        self.base_rows = info.base_rows or 0
        for cte in run.group.ctes:  # fail early on a head type DuckDB cannot mirror
            for f in run.states[cte.key].schema.fields:
                _duck_type(f.dataType)
        self.pull()

    def close(self) -> None:
        try:
            self.con.close()
        except Exception:
            pass

    def sql(self, text: str) -> list[tuple]:
        return self.con.execute(text).fetchall()

    def count(self, table: str) -> int:
        return self.sql(f"SELECT count(*) FROM {_q(table)}")[0][0]

    # -- Spark -> driver

    def load(self, name: str, df: DataFrame, cache: bool = False) -> None:
        table = self.info.arrow.get(name) if cache else None
        if table is None:
            table = df.toArrow()
            if cache:
                self.info.arrow[name] = table
        self.con.register("rq_arrow_in", table)
        self.sql(f"CREATE TABLE {_q(name)} AS SELECT * FROM rq_arrow_in")
        self.con.unregister("rq_arrow_in")

    def pull(self) -> None:
        run = self.run_
        if self.info.relations is None:
            self.info.relations = _relations(run)
        for name, df in self.info.relations.values():
            self.load(name, df, cache=True)  # kept for a retry after an over-budget attempt
        for i, cte in enumerate(run.group.ctes):
            state = run.states[cte.key]
            names = {"all": f"rq_s{i}_all", "delta": f"rq_s{i}_delta", "new": f"rq_s{i}_new"}
            self.names[cte.key] = names
            self.load(names["all"], state.all)
            self.load(names["delta"], state.delta)
            self.totals[cte.key] = state.total_rows
            self.deltas[cte.key] = state.delta_rows
            if isinstance(state, ContributorState):
                names["contrib"] = f"rq_s{i}_contrib"
                self.load(names["contrib"], state.contributors)
        for cte in run.group.ctes:
            for branch in cte.recursive_branches:
                self.prepare(cte, branch)
            if cte.summing:
                self.recode_contributors(cte)

    # -- rendering branches for DuckDB

    def prepare(self, cte: CTEPlan, branch: Branch) -> None:
        """The branch as DuckDB SQL with its references as `__rq_bind_<binding>` tables, and the wrapper that
        casts its output to the head's types (and builds the contributor)."""
        run = self.run_
        select = branch.select.copy()
        contrib = cte.summing
        if contrib:
            if not isinstance(select, exp.Select):
                raise Untranslatable("a sum/count branch that is not a plain SELECT")
            for i, expr in enumerate(branch.contributor):
                select = select.select(exp.alias_(expr.copy(), f"__rq_k{i}", quoted=True), copy=False)
        for key, table in _branch_relations(run, branch, select):
            _rename(table, self.info.relations[key][0], table.alias_or_name)
        for table in list(select.find_all(exp.Table)):  # references: bound per variant
            if isinstance(table.this, exp.Placeholder):
                _rename(table, _BIND + table.this.name, table.alias)
        for marker in list(select.find_all(exp.Placeholder)):
            name = marker.name
            args = run.ctx.args or {}
            if name not in args:
                raise Untranslatable(f"parameter :{name}")
            value = args[name]
            # a Python float is a DOUBLE to Spark but would be a DECIMAL literal to DuckDB
            if value is not None and not isinstance(value, (bool, int, str)):
                raise Untranslatable(f"parameter :{name} of type {type(value).__name__}")
            marker.replace(exp.convert(value))
        check_forms(select)
        strict_casts(select)
        check_types(select, lambda exprs: self.probe_types(select, branch, exprs))
        self.truncate_casts(select, branch)
        text = select.sql("duckdb", identify=True)
        # Output types, with every reference bound to the whole relation.
        probe = _bind(text, {r.binding: self.names[r.cte]["all"] for r in branch.refs})
        types = [str(t) for t in self.con.sql(probe).types]
        schema = run.states[cte.key].schema
        width = len(schema.fields)
        extra = len(branch.contributor) if contrib else 0
        if len(types) != width + extra:
            raise Untranslatable("branch width")
        outputs = []
        for i, f in enumerate(schema.fields):
            target = _duck_type(f.dataType)
            source = types[i].upper()
            value = f'q."c{i}"'
            if target in _INTEGRAL_DUCK and source.startswith(("FLOAT", "DOUBLE", "REAL", "DECIMAL")):
                value = f"trunc({value})"  # Spark's cast truncates, DuckDB's rounds
            outputs.append(f"CAST({value} AS {target}) AS {_q(f.name)}")
        if contrib:
            parts = [f'"b" := {branch.index}'] + [f'"c{i}" := q."k{i}"' for i in range(extra)]
            outputs.append(f"to_json(struct_pack({', '.join(parts)})) AS {_q(CONTRIB)}")
        aliases = [f'"c{i}"' for i in range(width)] + [f'"k{i}"' for i in range(extra)]
        wrapper = f"SELECT {', '.join(outputs)} FROM ({{body}}) AS q({', '.join(aliases)})"
        self.branch_sql[(cte.key, branch.index)] = (text, wrapper, types[width:])

    def probe_types(self, select: exp.Select, branch: Branch, exprs: list) -> list[str]:
        """DuckDB's types of `exprs` in the branch's scope (binds only: no rows are read)."""
        probe = select.copy()
        probe.set("expressions", [exp.alias_(e.copy(), f"p{i}", quoted=True)
                                  for i, e in enumerate(exprs)])
        text = _bind(probe.sql("duckdb", identify=True),
                     {r.binding: self.names[r.cte]["all"] for r in branch.refs})
        return [str(t) for t in self.con.sql(text).types]

    def truncate_casts(self, select: exp.Expr, branch: Branch) -> None:
        """Spark's CAST of a fractional number to an integral type truncates, DuckDB's rounds:
        truncate first where the operand is FLOAT/DOUBLE/DECIMAL (typed by a DuckDB probe)."""
        casts = [c for c in select.find_all(exp.Cast)
                 if c.to.is_type(*exp.DataType.INTEGER_TYPES)]
        if not casts:
            return
        if not isinstance(select, exp.Select):
            raise Untranslatable("an integral CAST in a branch that is not a plain SELECT")
        probe = select.copy()
        probe.set("expressions", [exp.alias_(c.this.copy(), f"p{i}", quoted=True)
                                  for i, c in enumerate(casts)])
        text = _bind(probe.sql("duckdb", identify=True),
                     {r.binding: self.names[r.cte]["all"] for r in branch.refs})
        types = [str(t).upper() for t in self.con.sql(text).types]
        for cast, dtype in zip(casts, types):
            if dtype.startswith(("FLOAT", "DOUBLE", "REAL", "DECIMAL")):
                cast.set("this", exp.Anonymous(this="trunc", expressions=[cast.this]))

    def recode_contributors(self, cte: CTEPlan) -> None:
        """Spark's recursive contributors are `to_json(named_struct('b', i, 'c0', ...))`; rewrite
        them in the driver's encoding (values cast to the DuckDB types of the same expressions)
        so that a contributor met again on the driver is recognised. Base contributors are only
        ever produced at iteration 0, so they stay as Spark wrote them."""
        table = _q(self.names[cte.key]["contrib"])
        column = _q(CONTRIB)
        for branch in cte.recursive_branches:
            types = self.branch_sql[(cte.key, branch.index)][2]
            parts = [f'"b" := {branch.index}'] + [
                f"\"c{i}\" := CAST(json_extract_string({column}, '$.c{i}') AS {t})"
                for i, t in enumerate(types)
            ]
            self.sql(
                f"UPDATE {table} SET {column} = to_json(struct_pack({', '.join(parts)})) "
                f"WHERE json_extract_string({column}, '$.b') = '{branch.index}'"
            )

    # -- the loop

    def run(self, iteration: int) -> list:

        run = self.run_
        stats = []
        while any(self.deltas.values()):
            iteration += 1
            if iteration > self.settings.max_iterations:
                run.fail_iteration_limit(iteration - 1, {c.name: self.deltas[c.key] for c in run.group.ctes})
            started = self.started if not stats else time.perf_counter()
            produced = {cte.key: self.candidates(cte) for cte in run.group.ctes}
            for cte in run.group.ctes:
                if produced[cte.key]:
                    self.merge(cte)
                else:
                    self.no_change(cte)
                stats.append(IterationStats(
                    cte=cte.name, iteration=iteration, delta_rows=self.deltas[cte.key],
                    total_rows=self.totals[cte.key], seconds=time.perf_counter() - started,
                    join_strategy="driver", ran_on="driver",
                ))
                started = time.perf_counter()
            driver_rows = sum(self.totals.values()) + self.base_rows
            if (any(d > self.settings.endgame_max_delta_rows for d in self.deltas.values())
                    or driver_rows > self.settings.endgame_max_driver_rows):
                raise OverBudget(len(stats) // len(run.group.ctes))
        return stats

    def candidates(self, cte: CTEPlan) -> bool:
        """Materialise the CTE's candidates of this iteration; False when no rule ran."""
        parts = []
        for branch in cte.recursive_branches:
            text, wrapper, _ = self.branch_sql[(cte.key, branch.index)]
            for variant in branch.variants:
                bound = {}
                for ref, role in zip(branch.refs, variant):
                    if role == DELTA and self.deltas[ref.cte] == 0:
                        bound = None
                        break
                    bound[ref.binding] = self.names[ref.cte]["delta" if role == DELTA else "all"]
                if bound is None:
                    continue
                parts.append(wrapper.replace("{body}", _bind(text, bound)))
        if not parts:
            return False
        new = _q(self.names[cte.key]["new"])
        self.sql(f"CREATE OR REPLACE TABLE {new} AS " + " UNION ALL ".join(f"({p})" for p in parts))
        return True

    def no_change(self, cte: CTEPlan) -> None:
        delta = _q(self.names[cte.key]["delta"])
        self.sql(f"DELETE FROM {delta}")
        self.deltas[cte.key] = 0

    def merge(self, cte: CTEPlan) -> None:
        state = self.run_.states[cte.key]
        names = {k: _q(v) for k, v in self.names[cte.key].items()}
        cols = [_q(c) for c in state.columns]
        if isinstance(state, BagState):
            self.sql(f"CREATE OR REPLACE TABLE {names['delta']} AS SELECT * FROM {names['new']}")
            self.sql(f"INSERT INTO {names['all']} SELECT * FROM {names['delta']}")
        elif isinstance(state, SetState):
            self.sql(
                f"CREATE OR REPLACE TABLE {names['delta']} AS SELECT {', '.join(cols)} FROM "
                f"{names['new']} EXCEPT SELECT {', '.join(cols)} FROM {names['all']}"
            )
            self.sql(f"INSERT INTO {names['all']} SELECT * FROM {names['delta']}")
        elif isinstance(state, ContributorState):
            self.merge_contributors(cte, state, names)
        elif isinstance(state, ExtremaState):
            self.merge_extrema(cte, state, names)
        else:
            raise Untranslatable(f"state {type(state).__name__}")
        self.deltas[cte.key] = self.count(self.names[cte.key]["delta"])
        if isinstance(state, BagState):
            self.totals[cte.key] += self.deltas[cte.key]
        else:
            self.totals[cte.key] = self.count(self.names[cte.key]["all"])

    def merge_extrema(self, cte: CTEPlan, state: RelationState, names: dict[str, str]) -> None:
        key = [_q(k) for k in state.key]
        aggs = cte.aggregates
        group_by = f" GROUP BY {', '.join(key)}" if key else ""
        best = ", ".join([*key, *[f"{c.agg}({_q(c.name)}) AS {_q(c.name)}" for c in aggs]])
        value = {c.name: f"{_EXTREME[c.agg]}(o.{_q(c.name)}, b.{_q(c.name)})" for c in aggs}
        changed = " OR ".join(
            ["o.__rq_present IS NULL"]
            + [f"{value[c.name]} IS DISTINCT FROM o.{_q(c.name)}" for c in aggs]
        )
        outputs = [f"b.{_q(c)}" if c in state.key else f"{value[c]} AS {_q(c)}" for c in state.columns]
        self.sql(
            f"CREATE OR REPLACE TABLE {names['delta']} AS "
            f"WITH b AS (SELECT {best} FROM {names['new']}{group_by}), "
            f"o AS (SELECT *, true AS __rq_present FROM {names['all']}) "
            f"SELECT {', '.join(outputs)} FROM b LEFT JOIN o ON {_match('b', 'o', key)} "
            f"WHERE {changed}"
        )
        self.replace_groups(names["all"], names["delta"], key)

    def merge_contributors(self, cte: CTEPlan, state: ContributorState, names: dict[str, str]) -> None:
        key = [_q(k) for k in state.key]
        aggs = cte.aggregates
        contrib = _q(CONTRIB)
        fresh = ", ".join([
            *key, contrib,
            *[f"{c.agg if c.agg in _EXTREME else 'max'}({_q(c.name)}) AS {_q(c.name)}" for c in aggs],
        ])
        values = {}
        for c in aggs:
            new, old = f"f.{_q(c.name)}", f"o.{_q(c.name)}"
            if c.agg in _EXTREME:
                values[c.name] = f"{_EXTREME[c.agg]}({old}, {new})"
            elif isinstance(state.schema[c.name].dataType, (DoubleType, FloatType)):
                tolerance = repr(float(state.tolerance))
                values[c.name] = (
                    f"CASE WHEN {old} IS NOT NULL AND abs({new} - {old}) <= {tolerance} * abs({old}) "
                    f"THEN {old} ELSE coalesce({new}, {old}) END"
                )
            else:
                values[c.name] = f"coalesce({new}, {old})"
        changed = " OR ".join(
            ["o.__rq_present IS NULL"]
            + [f"{values[c.name]} IS DISTINCT FROM o.{_q(c.name)}" for c in aggs]
        )
        changes = "rq_changes"
        self.sql(
            f"CREATE OR REPLACE TEMP TABLE {changes} AS "
            f"WITH f AS (SELECT {fresh} FROM {names['new']} GROUP BY {', '.join([*key, contrib])}), "
            f"o AS (SELECT *, true AS __rq_present FROM {names['contrib']}) "
            f"SELECT {', '.join([*[f'f.{k}' for k in key], f'f.{contrib}'])}, "
            f"{', '.join(f'{values[c.name]} AS {_q(c.name)}' for c in aggs)} "
            f"FROM f LEFT JOIN o ON {_match('f', 'o', [*key, contrib])} WHERE {changed}"
        )
        contributor_cols = [*key, contrib, *[_q(c.name) for c in aggs]]
        self.sql(
            f"DELETE FROM {names['contrib']} USING {changes} "
            f"WHERE {_match(names['contrib'], changes, [*key, contrib])}"
        )
        self.sql(
            f"INSERT INTO {names['contrib']} ({', '.join(contributor_cols)}) "
            f"SELECT {', '.join(contributor_cols)} FROM {changes}"
        )
        totals = [
            f"CAST({_EXTREMA_AGG.get(c.agg, 'sum')}(t.{_q(c.name)}) AS "
            f"{_duck_type(state.schema[c.name].dataType)}) AS {_q(c.name)}"
            for c in aggs
        ]
        outputs = {**{k: f"t.{_q(k)}" for k in state.key}, **{c.name: t for c, t in zip(aggs, totals)}}
        group_by = f" GROUP BY {', '.join(f't.{k}' for k in key)}" if key else ""
        keys_changed = f"(SELECT DISTINCT {', '.join(key) or '1 AS one'} FROM {changes}) g"
        self.sql(
            f"CREATE OR REPLACE TABLE {names['delta']} AS "
            f"SELECT {', '.join(outputs[c] for c in state.columns)} FROM {names['contrib']} t "
            f"SEMI JOIN {keys_changed} ON {_match('t', 'g', key)}{group_by} HAVING count(*) > 0"
        )
        self.replace_groups(names["all"], names["delta"], key)

    def replace_groups(self, all_: str, delta: str, key: list[str]) -> None:
        self.sql(f"DELETE FROM {all_} USING {delta} WHERE {_match(all_, delta, key)}")
        self.sql(f"INSERT INTO {all_} SELECT * FROM {delta}")

    # -- driver -> Spark

    def write_back(self) -> None:
        run = self.run_
        spark = run.ctx.spark
        for cte in run.group.ctes:
            state = run.states[cte.key]
            names = self.names[cte.key]
            cols = ", ".join(_q(c) for c in state.columns)
            all_df = spark.createDataFrame(_arrow(self.con, f"SELECT {cols} FROM {_q(names['all'])}"),
                                           state.schema)
            contributors = None
            if isinstance(state, ContributorState):
                schema = state.contributors.schema
                ccols = ", ".join(_q(c) for c in schema.fieldNames())
                contributors = spark.createDataFrame(
                    _arrow(self.con, f"SELECT {ccols} FROM {_q(names['contrib'])}"), schema)
            state.restore(all_df, None, 0, self.totals[cte.key], contributors)


_EXTREME = {"min": "least", "max": "greatest"}  # both ignore NULLs in DuckDB, like min()/max()
_EXTREMA_AGG = {"min": "min", "max": "max"}


def _match(left: str, right: str, key: list[str]) -> str:
    if not key:
        return "TRUE"
    return " AND ".join(f"{left}.{k} IS NOT DISTINCT FROM {right}.{k}" for k in key)


_BIND = "__rq_bind_"


def _rename(table: exp.Table, name: str, alias: str) -> None:
    table.replace(exp.Table(
        this=exp.to_identifier(name, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
    ))


def _bind(text: str, bindings: dict[str, str]) -> str:
    """Put the DuckDB tables of this delta rule in place of the references."""
    for binding, table in bindings.items():
        text = text.replace(_q(_BIND + binding), _q(table))
    return text
