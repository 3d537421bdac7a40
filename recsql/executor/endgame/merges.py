"""Each merge kind's merge (`aggregates.Kind`), in DuckDB: the kind's Spark state
(`state/relations.py`) keeps its rows across iterations as this keeps them in the driver's tables
of one CTE (`names`: role -> DuckDB table: `new` candidates, `delta`, `all`, and `contrib` for a
sum/count head), and both render each aggregate from its one description
(`planner/aggregates.py`).

A merge turns `new` into the next `delta` and folds it into `all`. The statements are the same
in every iteration, so they are built once per CTE and rendered once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql.types import DoubleType, FloatType, StructType
from sqlglot import exp

from recsql.executor.endgame.database import own
from recsql.executor.endgame.translate import duck_type
from recsql.executor.state.relations import BEST, CONTRIB, ContributorState, RelationState
from recsql.planner import aggregates
from recsql.planner.aggregates import Kind
from recsql.planner.model import CTEPlan

_PRESENT = "__rq_present"  # marks the rows of a LEFT JOIN's right side that exist
_CHANGES = "rq_changes"  # a sum/count head's changed contributors, per iteration

Names = dict[str, str]


@dataclass(frozen=True)
class Merge:
    """The DuckDB statements of a CTE's merge, the last of which appends the delta to `all`, and
    whether the one before deletes the groups of `all` the delta replaces: the row counts DuckDB
    reports for those two statements are the delta's size and what `all` grew by, so neither
    needs a count (two statements fewer per iteration, a tenth of a tiny iteration's time)."""

    statements: list[str]
    replaces_groups: bool
    first: str  # the first statement, its candidates the CTE `new` whose body is `_CANDIDATES`

    def reading(self, candidates: exp.Query) -> str:
        """The first statement reading `candidates` in place, as a CTE named like the `new`
        table it reads: the iteration needs no statement to make that table (with the merge's
        two, three an iteration were a third of a tiny iteration's driver time). The candidates
        are rendered into the statement rendered once, not copied into its tree and the whole
        rendered again (two copies of the tree and its rendering were most of a tiny statement's
        time in sqlglot)."""
        return self.first.replace(_CANDIDATES_SQL, candidates.sql("duckdb", identify=True), 1)


# the body of the `new` CTE in a merge's rendered first statement, until the candidates replace it
_CANDIDATES = exp.select(exp.Literal.string("__rq_candidates__"))
_CANDIDATES_SQL = _CANDIDATES.sql("duckdb", identify=True)


def _reading_candidates(first: exp.Create, new: str) -> str:
    """`first` rendered with the CTE `new` (a placeholder body, `_CANDIDATES`) before its own:
    the others read it."""
    first = first.copy()
    query = first.expression
    cte = exp.CTE(this=_CANDIDATES.copy(), alias=exp.TableAlias(this=exp.to_identifier(new, quoted=True)))
    with_ = query.args.get("with_")
    if isinstance(with_, exp.With):
        with_.set("expressions", [cte, *with_.expressions])
    else:
        query.set("with_", exp.With(expressions=[cte]))
    text = first.sql("duckdb", identify=True)
    if text.count(_CANDIDATES_SQL) != 1:
        raise AssertionError("the merge's first statement renders the candidates' placeholder otherwise")
    return text


def merge_for(state: RelationState, cte: CTEPlan, names: Names) -> Merge:
    """The merge of `cte`'s kind, over `state`'s columns."""
    kind = aggregates.kind(cte)
    build, replaces_groups = MERGES[kind]
    statements = build(state, cte, names)
    first = statements[0]
    if not isinstance(first, exp.Create) or not isinstance(first.expression, exp.Query) \
            or any(_reads(s, names["new"]) for s in statements[1:]):
        raise AssertionError(f"the {kind.value} merge reads `new` after its first statement")
    if not isinstance(statements[-1], exp.Insert) or (
            replaces_groups and not isinstance(statements[-2], exp.Delete)):
        raise AssertionError(f"the {kind.value} merge does not end as its counts are read")
    return Merge([s.sql("duckdb", identify=True) for s in statements], replaces_groups,
                 _reading_candidates(first, names["new"]))


# A fixpoint the driver runs from the start, of one CTE whose state only ever gains rows (a set or
# a bag), runs one statement an iteration (`Rounds`): its rows are kept in the table `rounds`
# with the round that added each, `all` is a view of their columns, and an iteration's delta is
# the rows of the last round. The candidates are inserted straight into `rounds`, and DuckDB's
# count of them is the next delta's size: no delta table to make, no second statement to append
# it (DuckDB alone, medians: 2^20 tree, ancestors of a leaf, 20 rounds: 45 -> 39 ms; RMAT 2^12,
# 4 rounds: 17 -> 13 ms).
ROUND = "__rq_round"
_LAST_ROUND = exp.Placeholder(this="1")  # the statement's parameter: the round of the delta


@dataclass(frozen=True)
class Rounds:
    """The one statement of an iteration over a state kept in `names["rounds"]`, executed with
    the round of the delta its candidates read as its parameter."""

    state: RelationState
    names: Names
    distinct: bool  # a set (the rows not in `all` yet, once each), else a bag (every row)

    def tables(self) -> list[exp.Expr]:
        """`rounds`, empty, and `all` as the view of its state columns (the branches and the
        write-back read `all` as they read the state's table)."""
        return [
            empty_table(self.names["rounds"], self.state.schema, {ROUND: exp.DataType.build("INT")}),
            exp.Create(this=_table(self.names["all"]), kind="VIEW", properties=own(),
                       expression=self._columns(None)),
        ]

    def delta(self, round_: int) -> exp.Create:
        """The delta, the rows of `round_`, as the table `delta` (to hand Spark the states)."""
        return _create(self.names["delta"], self._columns(exp.Literal.number(round_)))

    def step(self, candidates: exp.Query) -> str:
        """The INSERT of `candidates`' new rows into `rounds` at the next round, their references
        to the delta table reading the rows of the parameter's round instead."""
        # built in place (copy=False): sqlglot's builders copy the tree at every call otherwise,
        # which was most of the time this took
        candidates = candidates.copy()
        for table in list(candidates.find_all(exp.Table)):
            if table.name == self.names["delta"] and not table.db:
                alias = table.alias or self.names["delta"]
                table.replace(self._columns(_LAST_ROUND.copy()).subquery(
                    exp.to_identifier(alias, quoted=True), copy=False))
        next_round = exp.alias_(exp.Add(this=_LAST_ROUND.copy(), expression=exp.Literal.number(1)), ROUND)
        fresh = exp.select(*[_col(c, "n") for c in self.state.columns], next_round).from_(
            exp.alias_(_table(self.names["new"]), "n", table=True), copy=False)
        if self.distinct:
            fresh = _unseen(fresh, self.names["rounds"], self.state.columns)
        fresh = fresh.with_(exp.to_identifier(self.names["new"], quoted=True), as_=candidates, copy=False)
        target = exp.Schema(this=_table(self.names["rounds"]), expressions=[
            exp.to_identifier(c, quoted=True) for c in [*self.state.columns, ROUND]])
        return exp.Insert(this=target, expression=fresh).sql("duckdb", identify=True)

    def _columns(self, round_: exp.Expr | None) -> exp.Select:
        select = exp.select(*[_col(c) for c in self.state.columns]).from_(
            _table(self.names["rounds"]), copy=False)
        return select if round_ is None else select.where(
            exp.EQ(this=_col(ROUND), expression=round_), copy=False)


def rounds_for(state: RelationState, names: Names) -> Rounds | None:
    """The one-statement iteration of `state`'s merge, if its kind only ever gains rows;
    `names` with a `rounds` table."""
    kind = aggregates.kind(state.cte)
    return Rounds(state, names, distinct=kind is Kind.SET) if kind.grows_only else None


def _bag(state: RelationState, cte: CTEPlan, names: Names) -> list[exp.Expr]:
    return [
        _create(names["delta"], exp.select("*").from_(_table(names["new"]))),
        _append(names["all"], names["delta"]),
    ]


def _set(state: RelationState, cte: CTEPlan, names: Names) -> list[exp.Expr]:
    """`new EXCEPT all`, spelled as the distinct rows of `new` anti-joined with `all` (NULLs
    match, as EXCEPT's do): DuckDB plans EXCEPT as that anti-join between two distincts, and
    the one distinct saves a little of a tiny iteration and a third of a large one (DuckDB
    alone, medians, 2^20 tree: ancestors of a leaf, 20 iterations, 52 -> 50 ms; the closure
    reachable from 2, 19 iterations to 524,286 rows, 205 -> 143 ms)."""
    new = exp.alias_(_table(names["new"]), "n", table=True)
    fresh = _unseen(exp.select(*[_col(c, "n") for c in state.columns]).from_(new), names["all"], state.columns)
    return [_create(names["delta"], fresh), _append(names["all"], names["delta"])]


def _unseen(select: exp.Select, seen: str, columns: list[str]) -> exp.Select:
    """`select` of the candidates (as `n`) made distinct and anti-joined with the table `seen` on
    `columns` (NULLs match, as EXCEPT's do): the rows new to the state, once each."""
    return select.distinct(copy=False).join(exp.alias_(_table(seen), "a", table=True),
                                            on=_match("n", "a", columns), join_type="anti", copy=False)


def _extrema(state: RelationState, cte: CTEPlan, names: Names) -> list[exp.Expr]:
    """Per group, the merge of the old value and the fold of the new ones; a column with payload
    is merged as its ranked tuple (`aggregates.ranked`), whose fields give it and its payload."""
    key, aggs = state.key, cte.aggregates
    payloads = {c.name: cte.payload(c) for c in aggs}
    merged = {c.name: BEST + c.name if payloads[c.name] else c.name for c in aggs}
    best = exp.select(*[_col(k) for k in key], *[
        exp.alias_(aggregates.aggregate(c).folded(
            aggregates.ranked(c, payloads[c.name]) if payloads[c.name] else _col(c.name)), merged[c.name])
        for c in aggs])
    best = best.from_(_table(names["new"]))
    if key:
        best = best.group_by(*[_col(k) for k in key])
    value = {merged[c.name]: aggregates.aggregate(c).combine(_col(merged[c.name], "o"), _col(merged[c.name], "b"))
             for c in aggs}
    outputs: dict[str, exp.Expr] = {k: _col(k, "b") for k in key}
    for c in aggs:
        chosen = value[merged[c.name]]
        fields = aggregates.unranked(chosen, c, payloads[c.name]) if payloads[c.name] else {c.name: chosen}
        for name, field in fields.items():
            outputs[name] = exp.alias_(field, name)
    ranked_old = [exp.alias_(aggregates.ranked(c, payloads[c.name]), merged[c.name])
                  for c in aggs if payloads[c.name]]
    delta = (exp.select(*[outputs[c] for c in state.columns]).from_("b")
             .join("o", on=_match("b", "o", key), join_type="left")
             .where(_changed(value))
             .with_("b", as_=best)
             .with_("o", as_=_present(names["all"], ranked_old)))
    return [_create(names["delta"], delta), *_replace_groups(names["all"], names["delta"], key)]


def _contributors(state: RelationState, cte: CTEPlan, names: Names) -> list[exp.Expr]:
    assert isinstance(state, ContributorState)  # MERGES pairs this merge with the class
    key, aggs = state.key, cte.aggregates
    per_contributor = [*key, CONTRIB]
    fresh = exp.select(*[_col(k) for k in per_contributor], *[
        exp.alias_(aggregates.aggregate(c).fresh(_col(c.name)), c.name) for c in aggs
    ]).from_(_table(names["new"])).group_by(*[_col(k) for k in per_contributor])
    values = {c.name: _contribution(state, c.name, aggregates.aggregate(c)) for c in aggs}
    changes = (exp.select(*[_col(k, "f") for k in per_contributor],
                          *[exp.alias_(values[c.name], c.name) for c in aggs])
               .from_("f")
               .join("o", on=_match("f", "o", per_contributor), join_type="left")
               .where(_changed(values))
               .with_("f", as_=fresh)
               .with_("o", as_=_present(names["contrib"])))
    contributor_cols = [*per_contributor, *[c.name for c in aggs]]
    totals = {c.name: exp.alias_(exp.cast(
        aggregates.aggregate(c).total(_col(c.name, "t")),
        duck_type(state.schema[c.name].dataType)), c.name) for c in aggs}
    outputs: list[exp.Expr] = [_col(c, "t") if c in key else totals[c] for c in state.columns]
    distinct_keys: list[exp.Expr] = [_col(k) for k in key] or [exp.alias_(exp.Literal.number(1), "one")]
    keys_changed = (exp.select(*distinct_keys).distinct().from_(_table(_CHANGES)).subquery("g"))
    delta = (exp.select(*outputs)
             .from_(exp.alias_(_table(names["contrib"]), "t", table=True))
             .join(keys_changed, on=_match("t", "g", key), join_type="semi"))
    if key:
        delta = delta.group_by(*[_col(k, "t") for k in key])
    delta = delta.having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)))
    return [
        _create(_CHANGES, changes),
        exp.Delete(this=_table(names["contrib"]), using=[_table(_CHANGES)],
                   where=exp.Where(this=_match(names["contrib"], _CHANGES, per_contributor))),
        exp.Insert(
            this=exp.Schema(this=_table(names["contrib"]),
                            expressions=[exp.to_identifier(c) for c in contributor_cols]),
            expression=exp.select(*[_col(c) for c in contributor_cols]).from_(_table(_CHANGES))),
        _create(names["delta"], delta),
        *_replace_groups(names["all"], names["delta"], key),
    ]


def _contribution(state: ContributorState, name: str, aggregate: aggregates.Aggregate) -> exp.Expr:
    """A contributor's value after this iteration, from its fresh value `f` and its old one `o`."""
    floating = isinstance(state.schema[name].dataType, (DoubleType, FloatType))
    return aggregate.contribution(_col(name, "f"), _col(name, "o"), state.tolerance if floating else None)


def _changed(values: Mapping[str, exp.Expr]) -> exp.Expr:
    """New to the relation, or a value that differs from the old one (NULLs compare equal)."""
    return exp.or_(exp.Is(this=_col(_PRESENT, "o"), expression=exp.Null()), *[
        aggregates.changed(value, _col(name, "o")) for name, value in values.items()])


def _present(table: str, extra: list[exp.Expr] | None = None) -> exp.Select:
    return exp.select(exp.Star(), *(extra or []), exp.alias_(exp.true(), _PRESENT)).from_(_table(table))


def _replace_groups(all_: str, delta: str, key: list[str]) -> list[exp.Expr]:
    return [
        exp.Delete(this=_table(all_), using=[_table(delta)],
                   where=exp.Where(this=_match(all_, delta, key))),
        _append(all_, delta),
    ]


def empty_table(name: str, schema: StructType, extra: Mapping[str, exp.DataType] | None = None) -> exp.Create:
    """The statement's own empty table `name` with `schema`'s columns in their DuckDB types (and
    `extra` columns after them)."""
    columns = [(f.name, duck_type(f.dataType)) for f in schema.fields] + list((extra or {}).items())
    return exp.Create(this=exp.Schema(this=_table(name), expressions=[
        exp.ColumnDef(this=exp.to_identifier(column, quoted=True), kind=kind) for column, kind in columns
    ]), kind="TABLE", properties=own())


def _create(name: str, select: exp.Query) -> exp.Create:
    """A table of the statement's own (database.own)."""
    return exp.Create(this=_table(name), kind="TABLE", replace=True, properties=own(),
                      expression=select)


def _append(target: str, source: str) -> exp.Insert:
    return exp.insert(exp.select("*").from_(_table(source)), _table(target))


def _match(left: str, right: str, key: list[str]) -> exp.Expr:
    """`left` and `right` agree on `key` (NULLs match, as Spark's grouping treats them)."""
    if not key:
        return exp.true()
    return exp.and_(*[exp.NullSafeEQ(this=_col(k, left), expression=_col(k, right)) for k in key])


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _reads(statement: exp.Expr, table: str) -> bool:
    return any(t.name == table for t in statement.find_all(exp.Table))


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table, quoted=True)


_Build = Callable[[RelationState, CTEPlan, Names], list[exp.Expr]]
# kind -> (its merge's statements, whether the delta replaces groups of `all`: a DELETE of them
# before the INSERT that appends the delta; else `all` grows by exactly the delta)
MERGES: dict[Kind, tuple[_Build, bool]] = {
    Kind.BAG: (_bag, False),
    Kind.SET: (_set, False),
    Kind.EXTREMA: (_extrema, True),
    Kind.CONTRIBUTORS: (_contributors, True),
}
