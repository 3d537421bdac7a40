"""What each head aggregate means, written once as sqlglot expressions and rendered to both
engines: Spark SQL for the Spark loop's states (`executor/state/relations.py`) and DuckDB SQL for
the driver endgame's merges (`executor/endgame/merges.py`). It is part of the plan's data model
(the planner and the executor both read it). An aggregate is added here, in `AGGREGATES`, and
nowhere else; the merge kinds (`Kind`) say how a relation's rows are kept, and each engine's state or
merge renders a kind's columns from this module's expressions.

An aggregate is described by three expressions over named values:

* `merge`, over `a` and `b`: the better of two values of one group (a join: associative,
  commutative, idempotent), NULL never beating a value;
* `fold`, the SQL aggregate that merges a group's rows at once (`min(x)` for `least`); an
  aggregate users declare (`declared`) has none, and its merge reduces the group's values from
  its identity (`aggregate(collect_list(x), e, (a, b) -> m)` in Spark, `list_reduce` in DuckDB);
* `contribution`, for a sum over contributors (RaSQL's monotonic sum/count), over `new` and
  `old`: a contributor's value after an iteration.

A min()/max() column with payload is merged as its `ranked` tuple, whose leading fields order it
as Spark orders the value and payload, in both engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from recsql.planner.model import CTEPlan, DeclaredAggregate, HeadColumn

# the named values an aggregate's expressions are written over
A, B, NEW, OLD = "a", "b", "new", "old"
# `ranked`'s fields: the NULL-value flag, the value; a payload column's NULL flag and value
LAST, VALUE = "l", "v0"


def _flag(i: int) -> str:
    return f"n{i}"


def _payload(i: int) -> str:
    return f"p{i}"


def _named(name: str) -> exp.Column:
    return exp.column(name)


def substitute(template: exp.Expr, values: Mapping[str, exp.Expr]) -> exp.Expr:
    """`template` with each column whose first part is named in `values` (case-insensitively)
    replaced by a copy of its expression: `a` by it, `a.lo` by its field `lo`."""
    lowered = {name.lower(): value for name, value in values.items()}

    def swap(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column):
            return node
        first, *fields = node.parts
        if first.name.lower() not in lowered:
            return node
        swapped = lowered[first.name.lower()].copy()
        for field in fields:
            swapped = exp.Dot(this=swapped, expression=field.copy())
        return swapped
    return template.transform(swap)


@dataclass(frozen=True)
class Aggregate:
    """One head aggregate's meaning (see the module's docstring)."""

    name: str
    merge: exp.Expr  # over `a` and `b`
    fold: type[exp.AggFunc] | None  # None: the merge reduces a group's values from `identity`
    summing: bool = False  # a sum over contributors (else the relation keeps the merged value)
    skips_nulls: bool = False  # the merge itself ignores a NULL value (else `combine` does)
    identity: exp.Expr | None = None  # merged with any value, gives it back
    type: exp.DataType | None = None  # a declared aggregate's type: its merges are cast to it

    def combine(self, a: exp.Expr, b: exp.Expr) -> exp.Expr:
        """`merge` of the values `a` and `b`; a NULL value never beats the other one."""
        merged = self._typed(substitute(self.merge, {A: a, B: b}))
        if self.skips_nulls or self.summing:
            return merged
        return exp.Case(ifs=[exp.If(this=exp.Is(this=a.copy(), expression=exp.Null()), true=b.copy()),
                             exp.If(this=exp.Is(this=b.copy(), expression=exp.Null()), true=a.copy())],
                        default=merged)

    def folded(self, value: exp.Expr) -> exp.Expr:
        """`fold` over a group's `value`s, or the merge reducing the non-NULL ones from the
        identity (NULL when there is none, as a SQL aggregate's)."""
        if self.fold is not None:
            return self.fold(this=value)
        if self.identity is None:  # never: `declared` gives every reducing aggregate one
            raise AssertionError(f"aggregate `{self.name}` has neither a fold nor an identity")
        present = exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null()))
        values = exp.Filter(this=exp.ArrayAgg(this=value.copy()), expression=exp.Where(this=present))
        step = exp.Lambda(this=self._typed(substitute(self.merge, {A: exp.column(_ACC), B: exp.column(_NEXT)})),
                          expressions=[exp.to_identifier(_ACC), exp.to_identifier(_NEXT)])
        reduced = exp.Reduce(this=values, initial=self._typed(self.identity.copy()), merge=step)
        none = exp.EQ(this=exp.Count(this=value.copy()), expression=exp.Literal.number(0))
        return exp.Case(ifs=[exp.If(this=none, true=exp.Null())], default=self._typed(reduced))

    def _typed(self, value: exp.Expr) -> exp.Expr:
        return value if self.type is None else exp.Cast(this=value, to=self.type.copy())

    def fresh(self, value: exp.Expr) -> exp.Expr:
        """A contributor's value from one iteration's rows: the merge of its derivations, or for
        a sum/count (one value per contributor and iteration) that value (max picks it)."""
        return exp.Max(this=value) if self.summing else self.folded(value)

    def contribution(self, new: exp.Expr, old: exp.Expr, tolerance: float | None) -> exp.Expr:
        """A contributor's value after an iteration, from its `new` value (NULL: none this
        iteration) and its `old` one (NULL: new contributor). An extremum keeps the better; a
        sum/count takes the new one, but a floating-point value (`tolerance` given) within
        the tolerance of the old keeps the old, so that the fixpoint can end."""
        if not self.summing:
            return self.combine(old, new)
        latest = exp.Coalesce(this=new.copy(), expressions=[old.copy()])
        if tolerance is None:
            return latest
        # repr(float) cast to DOUBLE: the same double in both engines (Spark reads `0.5` as a decimal)
        bound = exp.cast(exp.Literal.number(repr(float(tolerance))), exp.DataType.Type.DOUBLE)
        within = exp.and_(
            exp.Not(this=exp.Is(this=old.copy(), expression=exp.Null())),
            exp.LTE(this=exp.Abs(this=exp.Sub(this=new.copy(), expression=old.copy())),
                    expression=exp.Mul(this=bound, expression=exp.Abs(this=old.copy()))))
        return exp.Case(ifs=[exp.If(this=within, true=old.copy())], default=latest)

    def total(self, value: exp.Expr) -> exp.Expr:
        """A group's value from its contributors' values."""
        return exp.Sum(this=value) if self.summing else self.folded(value)


def _extremum(name: str, merge: type[exp.Least] | type[exp.Greatest], fold: type[exp.AggFunc]) -> Aggregate:
    # LEAST/GREATEST skip NULLs in both engines, as min()/max() do (sqlglot writes the
    # NULL-propagating form unless told they ignore NULLs)
    return Aggregate(name, merge(this=_named(A), expressions=[_named(B)], ignore_nulls=True), fold,
                     skips_nulls=True)


def _join(name: str, merge: type[exp.Binary], fold: type[exp.AggFunc]) -> Aggregate:
    # Spark's own lattice joins: BIT_OR, BOOL_OR, ... (the same function in DuckDB)
    return Aggregate(name, merge(this=_named(A), expression=_named(B)), fold)


def _sum(name: str) -> Aggregate:
    # a group's contributors add up (`total`); two values of one contributor never meet in a merge
    return Aggregate(name, exp.Add(this=_named(A), expression=_named(B)), exp.Sum, summing=True)


# canonical head aggregate (planner/model.AGGREGATES) -> its meaning
AGGREGATES: dict[str, Aggregate] = {
    "min": _extremum("min", exp.Least, exp.Min),
    "max": _extremum("max", exp.Greatest, exp.Max),
    "sum": _sum("sum"),
    "count": _sum("count"),
    "bit_or": _join("bit_or", exp.BitwiseOr, exp.BitwiseOrAgg),
    "bit_and": _join("bit_and", exp.BitwiseAnd, exp.BitwiseAndAgg),
    "bool_or": _join("bool_or", exp.Or, exp.LogicalOr),
    "bool_and": _join("bool_and", exp.And, exp.LogicalAnd),
}
# the parameters of a declared merge's lambda when it reduces a group's values (`folded`): names
# no column of a state has, so that the lambda captures none
_ACC, _NEXT = "__rq_acc", "__rq_next"


def declared(aggregate: DeclaredAggregate) -> Aggregate:
    """The meaning of an aggregate users declared: its merge over `a` and `b`, reducing a
    group's values from its identity, every result cast to its type."""
    first, second = aggregate.parameters
    merge = substitute(aggregate.merge, {first: _named(A), second: _named(B)})
    return Aggregate(aggregate.name.lower(), merge, None, identity=aggregate.identity,
                     type=aggregate.type)


def aggregate(column: HeadColumn) -> Aggregate:
    """The meaning of aggregated head `column`."""
    if column.agg is None:  # never: called on `CTEPlan.aggregates` only
        raise AssertionError(f"`{column.name}` is a group-key column, not an aggregate")
    if column.declared is not None:
        return declared(column.declared)
    return AGGREGATES[column.agg]


class Kind(Enum):
    """How a relation keeps its rows across iterations, one per head semantics; each engine has
    one state (Spark) and one merge (DuckDB) per kind."""

    BAG = "bag"  # UNION ALL: every step's rows
    SET = "set"  # UNION without aggregates: each distinct row once
    EXTREMA = "extrema"  # min()/max() (and payload), any other join: a group's merged value
    CONTRIBUTORS = "contributors"  # sum()/count(): a sum over contributors' latest values

    @property
    def grows_only(self) -> bool:
        """The relation only ever gains rows (its delta never replaces a row of it)."""
        return self in (Kind.BAG, Kind.SET)


def kind(cte: CTEPlan) -> Kind:
    if cte.bag:
        return Kind.BAG
    if cte.summing:
        return Kind.CONTRIBUTORS
    return Kind.EXTREMA if cte.aggregates else Kind.SET


def ranked(column: HeadColumn, payload: list[HeadColumn], table: str | None = None) -> exp.Expr:
    """The value a min()/max() column with payload is merged as: a STRUCT of its value and its
    payload columns in head order, compared lexicographically as Spark orders them (NULLs first,
    NaN last, -0.0 equal to 0.0), in both engines.

    A leading flag keeps the rule of min()/max() that a NULL value never beats a non-NULL one
    (`min` ranks it last, `max` first). DuckDB puts a NULL field after every value where Spark
    puts it first, so each payload field is preceded by a flag that is false for NULL: the flag
    decides, and two NULLs compare equal in both. The value needs none: its own flag sets NULL
    values apart."""
    value = exp.column(column.name, table, quoted=True)
    is_null = exp.Is(this=value, expression=exp.Null())
    fields: list[tuple[str, exp.Expr]] = [
        (LAST, is_null if column.agg == "min" else exp.Not(this=is_null)), (VALUE, value.copy())]
    for i, p in enumerate(payload, start=1):
        field = exp.column(p.name, table, quoted=True)
        fields += [(_flag(i), exp.Not(this=exp.Is(this=field, expression=exp.Null()))),
                   (_payload(i), field.copy())]
    return exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(name), expression=e) for name, e in fields])


def ranked_fields(column: HeadColumn, payload: list[HeadColumn]) -> list[tuple[str, str | None]]:
    """`ranked`'s fields in order: (field, the head column it holds, None for a flag)."""
    fields: list[tuple[str, str | None]] = [(LAST, None), (VALUE, column.name)]
    for i, p in enumerate(payload, start=1):
        fields += [(_flag(i), None), (_payload(i), p.name)]
    return fields


def unranked(tuple_: exp.Expr, column: HeadColumn, payload: list[HeadColumn]) -> dict[str, exp.Expr]:
    """Head column name -> its value in `tuple_`, a `ranked` tuple of `column` and `payload`."""
    names = [VALUE, *[_payload(i) for i in range(1, len(payload) + 1)]]
    return {c.name: exp.Dot(this=exp.Paren(this=tuple_.copy()), expression=exp.to_identifier(name))
            for c, name in zip([column, *payload], names)}


def changed(new: exp.Expr, old: exp.Expr) -> exp.Expr:
    """The merged value differs from the old one (NULLs compare equal)."""
    return exp.NullSafeNEQ(this=new.copy(), expression=old.copy())
