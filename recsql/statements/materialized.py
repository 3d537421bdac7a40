"""Materialized views: `CREATE MATERIALIZED VIEW name AS <recursive query>`, `REFRESH
MATERIALIZED VIEW name [FULL]`, `EXPLAIN REFRESH MATERIALIZED VIEW name`, `DROP MATERIALIZED
VIEW [IF EXISTS] name`, and the rows `DESCRIBE TABLE EXTENDED name` adds to Spark's.

A refresh compares each base relation with what it was at the last refresh and takes one of
three paths (`decide`, which EXPLAIN shows with its reason):

    unchanged    no base relation changed: the stored answer is still the answer
    incremental  rows were only appended (files only added to a file-based table) and the query
                 is monotone (set UNION, min/max) in one recursive group: the fixpoint continues
                 from its stored state, the new rows' derivations its first delta
                 (`recsql.executor.strategies.seeded`); after rows were removed or
                 rewritten (deletes, updates), under the same query shapes, the stored fixpoint
                 is re-derived on the driver (`_rederive`): from the removed rows alone where
                 the bases' files at the last refresh are kept (hard links), else from what
                 still stands
    full         anything else: the query runs again from scratch

Where the view's answer, state and bookkeeping live is `recsql.statements.mv_storage`'s."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError, RecSQLExecutionError
from recsql.executor.endgame.seeded import SeedFiles, staged_file
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
from recsql.executor.run import Evaluated, Executor
from recsql.executor.state.bases import file_identity
from recsql.executor.strategies import seeded
from recsql.executor.strategies.recovery import read_relations
from recsql.parser import Statement, parse_statement
from recsql.planner import QueryPlan
from recsql.planner.model import GroupStep, ViewStep, cte_binding
from recsql.planner.names import TableName
from recsql.planner.seeds import non_deterministic
from recsql.planner.views import Expansion
from recsql.statements import mv_storage, stages
from recsql.statements.mv_storage import Stored
from recsql.statements.request import Request, Result
from recsql.statements.targets import target

UNCHANGED, INCREMENTAL, FULL = "unchanged", "incremental", "full"
# formats whose files hold every column, so the rows of new files alone can be read back
SELF_DESCRIBING = {"parquet", "orc"}


def takes(statement: Statement) -> bool:
    """Whether the statement is one of this module's forms."""
    node = statement.expression
    if isinstance(node, exp.Refresh):
        return node.text("kind").upper() == "MATERIALIZED VIEW"
    if statement.explain is not None:
        return False
    if isinstance(node, exp.Create):
        return any(isinstance(p, exp.MaterializedProperty) for p in _properties(node))
    if isinstance(node, exp.Describe):  # of a table as a whole, in rows (not AS JSON)
        return (node.text("style").upper() in ("EXTENDED", "FORMATTED") and isinstance(node.this, exp.Table)
                and not node.args.get("partition") and not node.args.get("as_json"))
    return isinstance(node, exp.Drop) and bool(node.args.get("materialized"))


def run(request: Request, node: exp.Expr) -> Result:
    if isinstance(node, exp.Refresh):
        name = TableName.of(node.this)
        full = node.args.get("mode") is not None
        if request.statement.explain is not None:
            return explain(request, name, full)
        return refresh(request, name, full=full)
    if isinstance(node, exp.Create):
        return create(request, node)
    if isinstance(node, exp.Describe):
        return describe(request, node)
    if not isinstance(node, exp.Drop):  # never: `takes` took only these forms
        raise AssertionError(f"not a materialized view statement: {node.sql('rasql')}")
    return drop(request, node)


# -- the statements ---------------------------------------------------------------------------


def create(request: Request, node: exp.Create) -> Result:
    table = target(node)
    name = TableName.of(table)
    if mv_storage.exists(request.spark, name):
        if node.args.get("exists"):
            return request.command()
        if not node.args.get("replace") or mv_storage.read(request.spark, name) is None:
            raise RecSQLAnalysisError(
                f"Cannot create materialized view {name} because a table or view of that name "
                "already exists; choose another name, drop it, or (for a materialized view) "
                "write CREATE OR REPLACE MATERIALIZED VIEW",
                condition="TABLE_OR_VIEW_ALREADY_EXISTS")
    if not isinstance(node.expression, exp.Query):
        raise RecSQLAnalysisError(f"CREATE MATERIALIZED VIEW {name} needs AS <query>",
                                  condition="RECSQL_MATERIALIZED_VIEW_QUERY")
    expansion = stages.bind(request, node.expression)
    plan = stages.plan(request, expansion)
    if plan is None:
        raise RecSQLAnalysisError(
            f"Materialized view {name} is not recursive: recsql keeps materialized views of "
            "recursive queries; for another query use CREATE TABLE ... AS, or Spark "
            "Declarative Pipelines' CREATE MATERIALIZED VIEW",
            condition="RECSQL_MATERIALIZED_VIEW_NOT_RECURSIVE")
    bound = sorted(plan.parameters) or sorted(request.frames)
    if bound:
        raise RecSQLAnalysisError(
            f"Materialized view {name} cannot keep the parameter(s) {', '.join(bound)} bound "
            "for this statement: a refresh runs the definition again without them; write the "
            "values into its text", condition="RECSQL_VIEW_WITH_PARAMETERS")
    analysed = stages.analyse(request, plan)
    bases = identities(request.spark, read_relations(plan))
    evaluated = request.executor.execute(analysed)
    old = mv_storage.read(request.spark, name)
    _store(request, Stored(name=name, definition=node.expression.sql("rasql"), version="",
                           answer="", bases=bases, bound=_digest(expansion)),
           plan, evaluated, "full: created", old)
    return request.command(evaluated.stats, plan)


def refresh(request: Request, name: TableName, *, full: bool = False) -> Result:
    stored = _stored(request.spark, name)
    current = _current_bases(request.spark, stored, full)
    sub, plan, bound = _plan(request, stored)
    decision = decide(stored, plan, current, full, bound, request.settings.refresh_incremental,
                      request.settings.endgame_enabled, _linked(request.spark, stored, current))
    if decision.path == UNCHANGED:
        return request.command(plan=plan)
    staging = _staging(request.spark, name) if decision.path == INCREMENTAL else None
    try:
        seed = _seed(sub, stored, plan, decision, current, staging) if decision.path == INCREMENTAL else None
        settings = request.settings
        if seed is not None:  # the doubling rules are proven from the base step only
            settings = dataclasses.replace(settings, doubling_after_iterations=0)
        executor = Executor(spark=request.spark, settings=settings, args=None, frames={},
                            tables=sub.catalog.frames, on_iteration=request.on_iteration)
        analysed = stages.analyse(sub, plan)
        evaluated = (executor.execute(analysed) if seed is None
                     else executor.execute(analysed, seeded.starting_from(seed)))
        staged = {key: path for key in evaluated.rows
                  if staging is not None and os.path.isfile(path := staged_file(staging, key))}
        _store(request, dataclasses.replace(stored, bases=current, bound=bound), plan, evaluated,
               f"{decision.path}: {decision.why}", stored, staged)
    finally:  # the version's tables hold hard links to what they keep of it
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return request.command(evaluated.stats, plan)


def _staging(spark: SparkSession, name: TableName) -> str:
    """A new hidden directory where the driver writes the states it finishes (`staged_file`):
    in the view's schema's directory where it is local (the version's tables are there, and
    a hard link does not cross devices), else in the temporary directory."""
    try:
        with quiet_pyspark_error_logs():
            database = spark.catalog.getDatabase(".".join(name.parts[:-1]) or spark.catalog.currentDatabase())
        uri = database.locationUri or ""
    except AnalysisException:
        uri = ""
    where = urlparse(uri).path if uri.startswith("file:") else ""
    return tempfile.mkdtemp(prefix=".recsql_staging_", dir=where if os.path.isdir(where) else None)


def explain(request: Request, name: TableName, full: bool) -> Result:
    """Which path a refresh would take now, and why, with what changed in each base relation."""
    stored = _stored(request.spark, name)
    current = _current_bases(request.spark, stored, full)
    _, plan, bound = _plan(request, stored)
    decision = decide(stored, plan, current, full, bound, request.settings.refresh_incremental,
                      request.settings.endgame_enabled, _linked(request.spark, stored, current))
    lines = [f"REFRESH MATERIALIZED VIEW {name}: {decision.path} refresh",
             f"  why: {decision.why}",
             f"  last refreshed: {stored.refreshed_at} ({stored.refreshed_how})",
             *[f"  base {base}: {note}" for base, note in decision.notes.items()]]
    df = request.spark.createDataFrame([("\n".join(lines),)], "plan string")
    return Result(df=df, plan=plan, kind="explain")


def describe(request: Request, node: exp.Describe) -> Result:
    """Spark's `DESCRIBE TABLE EXTENDED` rows; for a materialized view, then a section saying
    what keeps it and when and how it was last refreshed (Spark's own rows, in its columns, stay
    as they are: BI tools parse them)."""
    described = request.passthrough()
    stored = mv_storage.read(request.spark, TableName.of(node.this))
    if stored is None:
        return Result(df=described, kind="command")
    rows = [*described.collect(), ("", "", ""), ("# Materialized View Information", "", ""),
            ("Maintained By", "recsql (REFRESH MATERIALIZED VIEW through recsql)", ""),
            ("Last Refreshed", stored.refreshed_at, ""), ("Last Refresh", stored.refreshed_how, "")]
    return Result(df=request.spark.createDataFrame(rows, described.schema), kind="command")


def drop(request: Request, node: exp.Drop) -> Result:
    tables = node.args.get("tables") or [node.this]
    for table in tables:
        name = TableName.of(table)
        stored = mv_storage.read(request.spark, name)
        if stored is None:
            if node.args.get("exists") and not mv_storage.exists(request.spark, name):
                continue
            raise _not_materialized(request.spark, name)
        mv_storage.drop_view(request.spark, name)
        mv_storage.drop_tables(request.spark, stored.tables)
    return request.command()


# -- what changed, and which path a refresh takes ---------------------------------------------


def identities(spark: SparkSession, names: set[TableName]) -> dict[str, dict[str, Any]]:
    return {name.sql: identity(spark, name) for name in sorted(names, key=lambda n: n.key)}


def identity(spark: SparkSession, name: TableName, before: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a base relation is now: its schema, and for a table read from local files alone its
    files with sizes and modification times (`executor/state/bases.py` identifies kept copies so), and
    the format its new files can be read back in (None: they cannot be read alone); `missing`
    for a relation the catalog does not have. `before`, its identity at the last refresh: where
    its files only grew since, under the same columns, it is the same table (dropping a managed
    table deletes its files), so its format is taken from there rather than asked of the
    catalog again (`DESCRIBE TABLE EXTENDED`, 0.1 s a base)."""
    try:
        with quiet_pyspark_error_logs():
            table = spark.catalog.getTable(name.sql)
            df = spark.table(name.sql)
    except AnalysisException:
        return {"missing": True}
    entry: dict[str, Any] = {"schema": df.schema.simpleString(), "files": None, "format": None}
    if table.isTemporary or (table.tableType or "").upper() == "VIEW":
        entry["why"] = "a view, whose rows have no files of their own"
        return entry
    files, local = file_identity(df)
    if not local:
        entry["why"] = "not read from local files alone" if files else "a table with no files"
        return entry
    entry["files"] = [list(f) for f in files]
    grew = (before is not None and "format" in before and before.get("files") is not None
            and before.get("schema") == entry["schema"] and _only_added(before, entry))
    entry["format"] = before["format"] if grew and before is not None else _readable_format(spark, name)
    return entry


def _only_added(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether every file of `before` is still one of `now`'s, unchanged."""
    return set(map(tuple, before["files"])) <= set(map(tuple, now["files"]))


def _readable_format(spark: SparkSession, name: TableName) -> str | None:
    """The table's format if the rows of some of its files can be read alone: an unpartitioned
    table (partition values live in directory names) in a format that needs no options."""
    with quiet_pyspark_error_logs():
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name.sql}").collect()
    provider = next(((r[1] or "").lower() for r in rows if r[0] == "Provider"), "")
    partitioned = any((r[0] or "").startswith("# Partition Information") for r in rows)
    return provider if provider in SELF_DESCRIBING and not partitioned else None


@dataclass
class Decision:
    path: str  # UNCHANGED, INCREMENTAL or FULL
    why: str
    appended: dict[str, list[str]] = field(default_factory=dict)  # base -> its new files
    formats: dict[str, str] = field(default_factory=dict)  # appended base -> its files' format
    notes: dict[str, str] = field(default_factory=dict)  # base -> what changed in it
    # rows were removed or rewritten: the stored fixpoint is re-derived (`_rederive`) from each
    # changed base read whole from these files
    rederive: dict[str, list[str]] = field(default_factory=dict)
    # and, where the bases as they were are kept (hard links, `mv_storage.link_bases`), their
    # files then: the re-derivation starts from the removed rows alone (`endgame/seeded.py`)
    before: dict[str, list[str]] = field(default_factory=dict)


def decide(stored: Stored, plan: QueryPlan, current: dict[str, dict[str, Any]], full: bool,
           bound: str, incremental: bool, on_driver: bool = True,
           linked: dict[str, list[str]] | None = None) -> Decision:
    """The path of a refresh from the bases as stored and as they are now, and the plan (with
    `bound`, the digest of its definition with the recursive views it reads expanded);
    `incremental`: whether a refresh may continue the stored fixpoint at all
    (`spark.recsql.refresh.incremental`); `on_driver`: whether the driver may run a fixpoint
    (`spark.recsql.endgame.enabled`), where a re-derivation after removed rows runs; `linked`:
    the changed bases' files at the last refresh, where they are kept (`_linked`)."""
    notes = {name: _change(stored.bases.get(name, {}), now) for name, now in current.items()}
    appended = {name: _new_files(stored.bases[name], now) for name, now in current.items()
                if notes[name].endswith("appended")}
    formats = {n: current[n]["format"] for n in appended if current[n].get("format")}
    decision = Decision(FULL, "", appended, formats, notes)
    reads = {name.sql for name in read_relations(plan)}
    unrecorded = sorted(reads - set(stored.bases))
    if full:
        decision.why = "FULL was asked"
    elif bound != stored.bound:
        decision.why = "a recursive view the definition reads was replaced since the last refresh"
    elif unrecorded:
        decision.why = f"the definition now reads {', '.join(unrecorded)}, not recorded at the last refresh"
    elif no_files := [n for n, now in current.items() if now.get("files") is None]:
        name = no_files[0]
        decision.why = (f"base {name} is {current[name].get('why', 'not a table')}: what changed in "
                        "it cannot be told, so it is always refreshed in full")
    elif not (changed := [n for n, note in notes.items() if note != "unchanged"]):
        decision.path, decision.why = UNCHANGED, "no base relation changed since the last refresh"
    elif rewritten := [n for n in changed if n not in appended]:
        _rederive(decision, stored, plan, current, changed, rewritten[0], incremental, on_driver,
                  linked or {})
    elif unreadable := [n for n in appended if n not in formats]:
        decision.why = (f"base {unreadable[0]} is partitioned or not parquet/orc: the rows of its "
                        "new files cannot be read alone yet")
    elif reason := shape_reason(plan, {TableName.parse(n) for n in appended}):
        decision.why = reason
    elif {c.key for g in plan.groups for c in g.ctes} != set(stored.states):
        decision.why = "no stored state matches the query's recursive relations"
    elif not incremental:
        decision.why = (f"rows were only appended to {', '.join(appended)} and the query is "
                        "monotone, so the fixpoint could continue from its stored state, but "
                        "spark.recsql.refresh.incremental is false (true by default); SET "
                        "spark.recsql.refresh.incremental = true to continue instead")
    else:
        decision.path = INCREMENTAL
        decision.why = (f"rows were only appended to {', '.join(appended)} and the query is "
                        "monotone: the fixpoint continues from its stored state, the new rows' "
                        "derivations its first delta")
    return decision


def _rederive(decision: Decision, stored: Stored, plan: QueryPlan, current: dict[str, dict[str, Any]],
              changed: list[str], rewritten: str, incremental: bool, on_driver: bool,
              linked: dict[str, list[str]]) -> None:
    """The path after rows were removed or rewritten in `rewritten` (and maybe others changed):
    a re-derivation of the stored fixpoint on the driver (`recsql.executor.endgame.seeded`),
    which reads every changed base whole from its parquet files, else a full recompute. Which
    rows were removed is not needed: the stored rows are checked against the tables as they are."""
    what = (f"files of base {rewritten} were removed or rewritten since the last refresh (a "
            "delete or an update)")
    decision.formats = {n: current[n]["format"] for n in changed if current[n].get("format")}
    not_parquet = [n for n in changed if decision.formats.get(n) != "parquet"]
    if not_parquet:
        decision.why = (f"{what}, and base {not_parquet[0]} is partitioned or not parquet: the "
                        "driver re-derives from unpartitioned parquet files only")
    elif reason := shape_reason(plan, set()):
        decision.why = f"{what}: {reason}"
    elif {c.key for g in plan.groups for c in g.ctes} != set(stored.states):
        decision.why = f"{what}: no stored state matches the query's recursive relations"
    elif not on_driver:
        decision.why = (f"{what}: the stored state is re-derived on the driver only, and "
                        "spark.recsql.endgame.enabled is false")
    elif not incremental:
        decision.why = (f"{what}: the stored fixpoint could be re-derived, but "
                        "spark.recsql.refresh.incremental is false (true by default); SET "
                        "spark.recsql.refresh.incremental = true to re-derive instead")
    else:
        decision.path = INCREMENTAL
        decision.rederive = {n: [f[0] for f in current[n]["files"]] for n in changed}
        lacking = _from_removed_reason(plan, changed, linked)
        if lacking is None:
            decision.before = {n: linked[n] for n in changed}
            decision.why = (f"{what}, and the query is monotone: on the driver, the removed rows "
                            "are found against the base's files at the last refresh (kept as hard "
                            "links), the stored rows whose value a removed row could have derived "
                            "are reset, and so on through the rows derived from them at their "
                            "value; only those keys are re-derived, from the rows that stay "
                            "(a full recompute on Spark where the driver cannot hold them)")
        else:
            decision.why = (f"{what}, and the query is monotone: on the driver, the stored rows "
                            "the tables still derive are re-derived from the base rows up (no "
                            "stored row kept by others it derives), then the fixpoint continues "
                            f"from them, a walk over every row that stands ({lacking}); a full "
                            "recompute on Spark where the driver cannot hold them")


def _from_removed_reason(plan: QueryPlan, changed: list[str], linked: dict[str, list[str]]) -> str | None:
    """Why the re-derivation cannot start from the removed rows alone, or None."""
    if missing := [n for n in changed if n not in linked]:
        return (f"the files of {missing[0]} at the last refresh are not kept, so the removed rows "
                "cannot be told")
    if reason := shape_reason(plan, {TableName.parse(n) for n in changed}):
        return f"not from the removed rows alone: {reason}"
    # without a payload every row at a reset row's value is reset: a component's whole label,
    # which measured slower than the grounding (CC at RMAT 2^18: 10.9 against 10.0 s FULL)
    bare = [c.name for g in plan.groups for c in g.ctes
            if not c.aggregates or any(not c.payload(a) for a in c.aggregates)]
    if bare:
        return (f"CTE {bare[0]} is set recursion or an extremum without payload columns, whose "
                "reset would take whole components")
    return None


def _linked(spark: SparkSession, stored: Stored, current: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Per base whose files changed, the hard links of its files at the last refresh, where the
    stored version kept them (`mv_storage.link_bases`)."""
    if not stored.states:
        return {}
    table = stored.states[min(stored.states)]["table"]
    linked = {}
    for base, before in stored.bases.items():
        files, now = before.get("files"), current.get(base, {})
        # only a base whose rows were removed or rewritten is read as it was (`decide`)
        if files is None or now.get("files") is None or _only_added(before, now):
            continue
        links = mv_storage.linked_files(spark, table, base, [f[0] for f in files])
        if links is not None:
            linked[base] = links
    return linked


def _change(before: dict[str, Any], now: dict[str, Any]) -> str:
    old, new = before.get("files"), now.get("files")
    if new is None:
        return f"{now.get('why', 'not a table')}: always refreshed in full"
    if old is None:
        return "had no files at the last refresh"
    if old == new:
        return "unchanged"
    if _only_added(before, now):
        return f"{len(new) - len(old)} file(s) appended"
    return "files removed or rewritten"


def _new_files(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    old = {tuple(f) for f in before["files"]}
    return [f[0] for f in now["files"] if tuple(f) not in old]


def shape_reason(plan: QueryPlan, appended: set[TableName]) -> str | None:
    """Why the plan cannot continue from a stored state after appends to `appended`, or None.
    Continuing is proven for one recursive group of set or min/max relations whose branches
    each read an appended table at most once (`recsql.executor.strategies.seeded`)."""
    groups = plan.groups
    if len(groups) != 1:
        return (f"the query has {len(groups)} recursive groups (strata): only a query of one "
                "is continued from its stored state yet")
    group = groups[0]
    if group.row_target is not None:
        return "a LIMIT may end its recursion early"
    for step in plan.steps[:plan.steps.index(group)]:
        if isinstance(step, ViewStep) and _reads(step.query, appended):
            return f"CTE {step.name}, read by the recursion, reads an appended table"
    for cte in group.ctes:
        if cte.bag:
            return f"CTE {cte.name} is UNION ALL recursion: its rows are a bag, not a fixpoint"
        if any(c.agg not in ("min", "max") for c in cte.aggregates):
            return (f"CTE {cte.name} aggregates with {', '.join(sorted({c.agg or '' for c in cte.aggregates}))}:"
                    " only set and min/max recursion refresh incrementally yet")
        if cte.level_limit is not None or cte.compared:
            return f"CTE {cte.name} limits its recursion depth or has SEARCH/CYCLE columns"
        for branch in cte.branches:
            if form := non_monotone(branch.select):
                return (f"a branch of CTE {cte.name} has {form}, so a row added to a base table "
                        "can take a derived row away: the query is not monotone")
            for table in appended:
                # a query nested in the branch (a scalar, IN or EXISTS subquery, a derived table):
                # its value or rows over the table grown are not its old ones plus the new rows'
                # (a min, a count, a correlated comparison), and what the stored rows derive with
                if any(_reads(nested, {table}) for nested in branch.select.find_all(exp.Select)
                       if nested is not branch.select):
                    return (f"a branch of CTE {cte.name} reads {table} in a subquery whose value "
                            "new rows change")
                count = _reads(branch.select, {table}) + sum(b.table == table for b in branch.bases)
                if count > 1:
                    return (f"a branch of CTE {cte.name} reads {table} {count} times: new rows "
                            "joined with new rows are not derived from the stored state yet")
    called = _non_deterministic(plan)
    if called:
        return f"the query calls {called}, which is not deterministic"
    return None


def non_monotone(select: exp.Expr) -> str | None:
    """A form whose rows a new row of a relation it reads can take away (an outer or anti join,
    EXCEPT, a NOT over a subquery), or None. The planner refuses these over the recursion itself
    (`planner/checks.py`); over a base table they still make a stored fixpoint one that appends
    or removals cannot be followed from."""
    for join in select.find_all(exp.Join):
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if kind == "ANTI" or (side in ("LEFT", "RIGHT", "FULL") and kind != "SEMI"):
            return f"a {' '.join(filter(None, (side, kind)))} JOIN"
    if select.find(exp.Except) is not None:
        return "an EXCEPT"
    if any(n.find(exp.Select) is not None for n in select.find_all(exp.Not)):
        return "a NOT over a subquery"
    return None


def _reads(node: exp.Expr, tables: set[TableName]) -> int:
    return sum(1 for t in node.find_all(exp.Table)
               if isinstance(t.this, exp.Identifier) and TableName.of(t) in tables)


def _non_deterministic(plan: QueryPlan) -> str | None:
    nodes: list[exp.Expr] = [plan.final]
    for step in plan.steps:
        if isinstance(step, ViewStep):
            nodes.append(step.query)
        elif isinstance(step, GroupStep):
            nodes += [b.select for c in step.ctes for b in c.branches]
    return next((name for node in nodes if (name := non_deterministic(node))), None)


# -- reading and writing the stored view ------------------------------------------------------


def _stored(spark: SparkSession, name: TableName) -> Stored:
    stored = mv_storage.read(spark, name)
    if stored is None:
        raise _not_materialized(spark, name)
    return stored


def _not_materialized(spark: SparkSession, name: TableName) -> RecSQLAnalysisError:
    what = "is a table or view, not" if mv_storage.exists(spark, name) else "does not exist: it is not"
    return RecSQLAnalysisError(
        f"{name} {what} a materialized view of recsql (made by CREATE MATERIALIZED VIEW "
        "through recsql); for a table, REFRESH TABLE re-reads its files",
        condition="RECSQL_NOT_A_MATERIALIZED_VIEW")


def _current_bases(spark: SparkSession, stored: Stored, full: bool) -> dict[str, dict[str, Any]]:
    """The stored bases as they are now; a dropped one, or (unless FULL) one whose columns
    changed, is an error that leaves the view as it was."""
    current = {}
    for base, before in stored.bases.items():
        now = identity(spark, TableName.parse(base), before)
        if now.get("missing") and not before.get("missing"):
            raise RecSQLAnalysisError(
                f"Base relation {base} of materialized view {stored.name} no longer exists "
                "(dropped since the last refresh); the view keeps its last answer. Recreate it "
                f"and run REFRESH MATERIALIZED VIEW {stored.name} FULL, or DROP MATERIALIZED "
                f"VIEW {stored.name}", condition="RECSQL_MATERIALIZED_VIEW_BASE_DROPPED")
        if not full and now.get("schema") != before.get("schema"):
            raise RecSQLAnalysisError(
                f"Base relation {base} of materialized view {stored.name} changed its columns "
                f"since the last refresh ({before.get('schema')} -> {now.get('schema')}); the "
                f"view keeps its last answer. Run REFRESH MATERIALIZED VIEW {stored.name} FULL "
                "to recompute it", condition="RECSQL_MATERIALIZED_VIEW_BASE_CHANGED")
        current[base] = now
    return current


def _plan(request: Request, stored: Stored) -> tuple[Request, QueryPlan, str]:
    """The stored definition planned again (not analysed: an unchanged view needs no types), in
    a request of its own (its text is what errors point at), and the digest of its expansion."""
    query = parse_statement(stored.definition).expression
    if not isinstance(query, exp.Query):  # never: CREATE stored a query
        raise AssertionError(f"materialized view {stored.name} stores no query")
    sub = dataclasses.replace(request, statement=Statement(stored.definition, query), args=None,
                              frames={})
    expansion = stages.bind(sub, query)
    plan = stages.plan(sub, expansion)
    if plan is None:
        raise RecSQLAnalysisError(
            f"The definition of materialized view {stored.name} no longer needs recursion "
            "(a recursive view it read was replaced); recreate it with CREATE OR REPLACE "
            "MATERIALIZED VIEW", condition="RECSQL_MATERIALIZED_VIEW_STATE_MISMATCH")
    return sub, plan, _digest(expansion)


def _digest(expansion: Expansion) -> str:
    return hashlib.sha256(expansion.query.sql("rasql").encode()).hexdigest()


def _seed(request: Request, stored: Stored, plan: QueryPlan, decision: Decision,
          current: dict[str, dict[str, Any]], staging: str | None) -> seeded.Seed:
    spark = request.spark
    states, rows, state_files = {}, {}, {}
    for cte in plan.groups[0].ctes:
        kept = stored.states[cte.key]
        with quiet_pyspark_error_logs():
            df = spark.table(kept["table"])
        if [c.lower() for c in df.columns] != [c.lower() for c in cte.columns]:
            raise RecSQLAnalysisError(
                f"The stored state of CTE {cte.name} of materialized view {stored.name} has "
                f"columns ({', '.join(df.columns)}) that no longer match its definition "
                f"({', '.join(cte.columns)}); run REFRESH MATERIALIZED VIEW {stored.name} FULL",
                condition="RECSQL_MATERIALIZED_VIEW_STATE_MISMATCH")
        states[cte.key], rows[cte.key] = df, int(kept["rows"])
        state_files[cte.key] = df.inputFiles()
    if decision.rederive:  # every changed base read whole from its files
        tables = {TableName.parse(b): files for b, files in decision.rederive.items()}
        before = {TableName.parse(b): files for b, files in decision.before.items()}
        identities: dict[TableName, tuple[list[tuple[Any, ...]] | None, list[tuple[Any, ...]]]] = {
            TableName.parse(b): (None, _files(current[b])) for b in decision.rederive}
        return seeded.Seed(states, rows, {}, SeedFiles(state_files, rows, tables, {}, rederive=True,
                                                       before=before, identities=identities,
                                                       staging=staging))
    appended: dict[TableName, DataFrame] = {}
    for base, files in decision.appended.items():
        table = TableName.parse(base)
        schema = spark.table(table.sql).schema
        appended[table] = spark.read.format(decision.formats[base]).schema(schema).load(files)
    on_driver = None
    if all(decision.formats[base] == "parquet" for base in decision.appended):
        # the driver reads them all itself (`endgame/seeded.py`)
        on_driver = SeedFiles(state_files, rows,
                              {TableName.parse(b): [f[0] for f in current[b]["files"]] for b in decision.appended},
                              {TableName.parse(b): new for b, new in decision.appended.items()},
                              identities={TableName.parse(b): (_files(stored.bases[b]), _files(current[b]))
                                          for b in decision.appended}, staging=staging)
    return seeded.Seed(states, rows, appended, on_driver)


def _files(entry: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A base's files with sizes and mtimes as `identity` recorded them, as `file_identity`
    gives them (the stored view keeps them as JSON lists)."""
    return [tuple(f) for f in entry["files"]]


def _store(request: Request, stored: Stored, plan: QueryPlan, evaluated: Evaluated,
           how: str, old: Stored | None, staged: dict[str, str] | None = None) -> None:
    """Write a new version of the view (states, answer), then point the view at it; on any
    failure drop what was written and leave the old version as it was. An answer that is one
    recursive CTE's state as it stands (`SELECT dst, cost, pred FROM path`) is that state's
    table, not a second copy of it. `staged`: per CTE key, the parquet file of its state the
    driver wrote already (`seeded.SeedFiles.staging`), which its table links to."""
    staged = staged or {}
    spark, name = request.spark, stored.name
    version = mv_storage.new_version()
    new = dataclasses.replace(stored, version=version, states={}, refreshed_how=how, answer="",
                              refreshed_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    written: list[str] = []
    picked = _picked(plan, evaluated)
    try:
        with quiet_pyspark_error_logs():
            directory = None  # of the first state's table, where the driver wrote it
            if len(plan.groups) == 1:  # what an incremental refresh can start from
                for i, (key, (df, rows)) in enumerate(sorted(evaluated.states.items())):
                    table = mv_storage.version_table(name, version, f"state_{i}")
                    written.append(table)
                    where = mv_storage.write(spark, table, df, evaluated.rows.get(key), staged.get(key))
                    directory = where if i == 0 else directory
                    new.states[key] = {"table": table, "rows": rows}
                    if picked is not None and picked[0] == key and _whole(picked[1], df, evaluated.df):
                        new.answer = table
            if not new.answer:
                new.answer = mv_storage.version_table(name, version, "answer")
                written.append(new.answer)
                mv_storage.write(spark, new.answer, evaluated.df, _answer_rows(picked, evaluated))
            if new.states:  # the bases as they are, for the removed rows of a later refresh
                mv_storage.link_bases(spark, new.states[min(new.states)]["table"], {
                    base: [f[0] for f in entry["files"]] for base, entry in new.bases.items()
                    if entry.get("files")}, directory)
        _check_unchanged(spark, name, new.bases)
        _check_current(spark, name, old)
        mv_storage.publish(spark, new, replace=old is not None, sql=request.text)
    except BaseException:
        mv_storage.drop_tables(spark, written)
        raise
    if old is not None:
        mv_storage.drop_tables(spark, old.tables)


def _picked(plan: QueryPlan, evaluated: Evaluated) -> tuple[str, list[int]] | None:
    """Where the final query only picks columns of one recursive CTE's state (`SELECT dst, cost
    FROM path`): that CTE's key and the positions of the columns it picks; else None."""
    final = plan.final
    if len(plan.groups) != 1 or not isinstance(final, exp.Select) or final.args.get("joins") \
            or any(final.args.get(k) for k in ("where", "group", "having", "qualify", "order",
                                                 "limit", "offset", "distinct", "laterals", "with")):
        return None
    source = final.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Placeholder):
        return None
    key = next((k for k in evaluated.states if cte_binding(k) == table.this.name), None)
    if key is None:
        return None
    index = {c.lower(): i for i, c in enumerate(evaluated.states[key][0].columns)}
    positions = [index.get(p.name.lower()) if isinstance(p, exp.Column) else None
                 for p in (e.this if isinstance(e, exp.Alias) else e for e in final.expressions)]
    if None in positions or len(positions) != len(evaluated.df.columns):
        return None
    return key, [p for p in positions if p is not None]


def _whole(positions: list[int], state: DataFrame, answer: DataFrame) -> bool:
    """Whether the answer is the state itself: all its columns in order, named and typed alike."""
    return positions == list(range(len(state.columns))) and \
        [(f.name, f.dataType) for f in state.schema.fields] == [(f.name, f.dataType) for f in answer.schema.fields]


def _answer_rows(picked: tuple[str, list[int]] | None, evaluated: Evaluated) -> Any:
    """The answer's rows as an Arrow table where the driver holds them (it finished the state
    the final query picks from); else None (Spark writes the answer)."""
    if picked is None or picked[0] not in evaluated.rows:
        return None
    return evaluated.rows[picked[0]].select(picked[1]).rename_columns(evaluated.df.columns)


def _check_unchanged(spark: SparkSession, name: TableName, bases: dict[str, dict[str, Any]]) -> None:
    """The bases' files are still those the refresh read: what is stored describes the answer.
    Their files alone are looked at again (what a refresh reads; a change of columns alone
    fails the next refresh, which compares them), not the whole `identity`: first on the local
    disk (`_same_on_disk`), and through Spark only where that finds a difference (Spark may
    still read what it listed before, as a table cached with its files does)."""
    for base, before in bases.items():
        files = before.get("files")
        if files is None:
            continue
        table = TableName.parse(base)
        if not _same_on_disk(_location(spark, table), files) and _files_now(spark, table) != files:
            raise RecSQLExecutionError(
                f"Base relation {base} changed while materialized view {name} was being "
                "refreshed; the view keeps its last answer: refresh it again",
                condition="RECSQL_MATERIALIZED_VIEW_BASE_CHANGED")


def _same_on_disk(root: str | None, files: list[list[Any]]) -> bool:
    """Whether the local directory `root` (a table's location), listed as Spark lists a table's
    files (recursively, without the names it skips), holds `files` and nothing else, each of the
    size and modification time recorded. A listing and a stat a file: at RMAT 2^20 listing the
    table's 1,618 files through Spark (`inputFiles()`, a Py4J round trip a file) took 0.4-0.5 s.
    False wherever this cannot tell (no local root, a name it does not parse)."""
    if root is None:
        return False
    recorded = {urlparse(f[0]).path: tuple(f[1:]) for f in files if urlparse(f[0]).scheme in ("", "file")}
    if len(recorded) != len(files):
        return False
    found: dict[str, tuple[Any, ...]] = {}
    folders = [root]
    try:
        while folders:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if _skipped(entry.name):
                        continue
                    if entry.is_dir():
                        folders.append(entry.path)
                    else:
                        stat = entry.stat()
                        found[entry.path] = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        return False
    return found == recorded


def _location(spark: SparkSession, name: TableName) -> str | None:
    """A table's local directory (one catalog call, 0.1 s), or None where it has none here or
    is gone."""
    try:
        with quiet_pyspark_error_logs():
            return mv_storage.table_directory(spark, name.sql)
    except AnalysisException:
        return None


def _skipped(name: str) -> bool:
    """Whether Spark's file listing skips a file or directory of this name (hidden ones, and
    those of a write in progress; parquet's summary files it keeps)."""
    hidden = name.startswith(".") or (name.startswith("_") and "=" not in name)
    return (hidden or name.endswith("._COPYING_")) and not name.startswith(("_metadata", "_common_metadata"))


def _files_now(spark: SparkSession, name: TableName) -> list[list[Any]] | None:
    """A table's files as `identity` records them, or None where it is gone."""
    try:
        with quiet_pyspark_error_logs():
            df = spark.table(name.sql)
    except AnalysisException:
        return None
    return [list(f) for f in file_identity(df)[0]]


def _check_current(spark: SparkSession, name: TableName, old: Stored | None) -> None:
    """The view is still the version this refresh started from: of two refreshes at once, the
    second to finish fails instead of dropping the first one's tables from under it."""
    if old is not None and mv_storage.current_version(spark, name) == old.version:
        return
    now = mv_storage.read(spark, name)  # the slow way: a view stored before the version's own property
    if (now.version if now else None) != (old.version if old else None):
        raise RecSQLExecutionError(
            f"Materialized view {name} was refreshed, created or dropped by another statement "
            "while this one ran; this refresh wrote nothing: run it again if it is still needed",
            condition="RECSQL_MATERIALIZED_VIEW_CONCURRENT_REFRESH")


def _properties(node: exp.Create) -> list[exp.Expr]:
    props = node.args.get("properties")
    return list(props.expressions) if props else []
