"""The spelling of recursive aggregates that every SQL parser accepts, read as RaSQL's head.

BI tools parse a query before sending it (Superset with sqlglot's Hive dialect) and refuse RaSQL's
head `path (Dst, min() AS Cost)`. They do parse an aggregate in a recursive term:

    WITH RECURSIVE path (dst, cost) AS (
      SELECT 1, 0
      UNION
      SELECT e.dst, MIN(p.cost + e.cost) FROM path p JOIN edges e ON p.dst = e.src GROUP BY e.dst)

Under `UNION` that term means the head aggregate `path (dst, min() AS cost)`: the aggregated
output column becomes an aggregated head column, the term projects the aggregate's argument in
its place, and its GROUP BY (exactly the other output columns: the CTE's group key) goes, as the
head's key groups. `to_head_aggregates` makes that one rewrite of the AST before planning, so the
planner, the executor and the driver endgame see the RaSQL form and nothing else changes.
PostgreSQL and Spark refuse an aggregate in a recursive term, so no query they answer changes
meaning. Under `UNION ALL` the term is left as written: each step aggregates the previous step's
rows, as DuckDB does.

`TERM_AGGREGATES` is the whole mapping, one row per aggregate a recursive term may use. A new
row names the head aggregate it means and what the branch projects in the aggregate's place.
sqlglot parses Spark's `EVERY(x)` and `SOME(x)`, and a call of an aggregate users declared
(`bor(x)`, found in the catalog), as plain function calls; those in recursive terms are marked
(`TermCall`) and mean the head aggregate they name (`TERM_CALLS`, or the declared one's name).
Spark's `MIN_BY(payload, value)` beside `MIN(value)` (`MAX_BY` beside `MAX`) is a payload column
of that `min()`: the head `argmin(cost) AS pred` (docs/dialect.md section 2).

A leaf: it imports no other planner module but the leaf `branches` (and the parser's `locate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser.dialect import AggregateColumn
from recsql.parser.locate import locate
from recsql.planner.branches import branches_of


class Unmappable(Exception):
    """An aggregate form with no head meaning; the message says why and what to write."""


def _argument(agg: exp.AggFunc) -> exp.Expr:
    """MIN(x) / MAX(x): the head takes the extremum of x (DISTINCT changes nothing)."""
    value = agg.this
    if isinstance(value, exp.Distinct):
        if len(value.expressions) != 1:
            raise Unmappable("it takes one argument")
        value = value.expressions[0]
    return value


def _summed(agg: exp.AggFunc) -> exp.Expr:
    """SUM(x): RaSQL's monotonic sum() adds x over the term's contributors."""
    if isinstance(agg.this, exp.Distinct):
        raise Unmappable("a recursive sum adds every contributor's value; DISTINCT has no "
                         "meaning there (drop it)")
    return agg.this


def _counted(agg: exp.AggFunc) -> exp.Expr:
    """COUNT(*) / COUNT(x): each contributor counts 1 (0 when x is NULL) in count(), which adds
    the values its branches project (docs/dialect.md section 2)."""
    if isinstance(agg.this, exp.Distinct) or agg.expressions:
        raise Unmappable("a recursive count adds one per contributor; write COUNT(*) or COUNT(x)")
    if isinstance(agg.this, exp.Star):
        return exp.Literal.number(1)
    return exp.case().when(exp.Is(this=agg.this.copy(), expression=exp.null()).not_(),
                           exp.Literal.number(1)).else_(exp.Literal.number(0))


def _called(agg: exp.AggFunc) -> exp.Expr:
    """BOR(x) of a declared aggregate, EVERY(x), SOME(x): the head merges x."""
    if len(agg.expressions) != 1:
        raise Unmappable("it takes one argument, the value merged")
    return agg.expressions[0]


class TermCall(exp.Anonymous, exp.AggFunc):
    """A call in a recursive term that sqlglot parses as a plain function but that is an
    aggregate (`to_head_aggregates` marks it): rendered as the call it was."""

    key = "anonymous"


def _payload(agg: exp.AggFunc) -> exp.Expr:
    """MIN_BY(x, v) / MAX_BY(x, v): the branch projects the payload x; v is MIN(v)'s value."""
    if agg.args.get("count") is not None:
        raise Unmappable("a payload column holds one value; drop the third argument")
    return agg.this


@dataclass(frozen=True)
class TermAggregate:
    """What an aggregate of a recursive term means as a RaSQL head column."""

    head: str  # the head aggregate, as in `min() AS cost`, or a payload's `argmin`
    value: Callable[[exp.AggFunc], exp.Expr]  # what the branch projects in the aggregate's place
    follows: type[exp.Expr] | None = None  # a payload: the aggregate whose winner it carries


TERM_AGGREGATES: dict[type[exp.Expr], TermAggregate] = {
    exp.Min: TermAggregate("min", _argument),
    exp.Max: TermAggregate("max", _argument),
    exp.Sum: TermAggregate("sum", _summed),
    exp.Count: TermAggregate("count", _counted),
    exp.ArgMin: TermAggregate("argmin", _payload, follows=exp.Min),  # MIN_BY, ARG_MIN
    exp.ArgMax: TermAggregate("argmax", _payload, follows=exp.Max),  # MAX_BY, ARG_MAX
    exp.BitwiseOrAgg: TermAggregate("bit_or", _argument),
    exp.BitwiseAndAgg: TermAggregate("bit_and", _argument),
    exp.LogicalOr: TermAggregate("bool_or", _argument),  # BOOL_OR
    exp.LogicalAnd: TermAggregate("bool_and", _argument),  # BOOL_AND
}
# Spark's aggregates that sqlglot parses as plain calls -> the head aggregate they mean
TERM_CALLS = {"every": "bool_and", "some": "bool_or"}

SUPPORTED = ("MIN, MAX, SUM or COUNT, Spark's BIT_OR, BIT_AND, BOOL_OR, BOOL_AND, EVERY and SOME, "
             "an aggregate declared with CREATE AGGREGATE, and MIN_BY / MAX_BY beside a MIN / MAX")
NOT_PREMAPPABLE = ("its value over a union is not a function of its values over the parts, so it "
                   "cannot be pushed into the recursion")
# Why an aggregate outside TERM_AGGREGATES has no head meaning, where more can be said than that
WHY_NOT = {
    exp.Avg: NOT_PREMAPPABLE, exp.Stddev: NOT_PREMAPPABLE, exp.Variance: NOT_PREMAPPABLE,
    exp.Median: NOT_PREMAPPABLE, exp.Quantile: NOT_PREMAPPABLE,
}
GROUP_KEY_RULE = (
    "under UNION, an aggregate in a recursive term is the CTE's head aggregate and the term's "
    "GROUP BY names exactly its other output columns (the CTE's key), by expression or by position"
)


@dataclass
class _Column:
    """An aggregated output column of a recursive term."""

    position: int
    mapping: TermAggregate
    node: exp.AggFunc
    value: exp.Expr
    of: int | None = None  # a payload: the position of the MIN/MAX column it follows


Reads = Callable[[exp.Expr, set[str]], object]  # truthy when the node reads one of the CTEs


def to_head_aggregates(query: exp.Query, sql: str, groups: dict[str, set[str]], reads: Reads,
                       declared: Callable[[str], bool] = lambda name: False) -> exp.Query:
    """`query` with every CTE whose recursive terms aggregate (under UNION) in RaSQL head form;
    `query` itself when none does. `groups` maps each recursive CTE to its recursive group;
    `declared` tells whether a function name is an aggregate users declared."""
    with_ = query.args.get("with_")
    if not isinstance(with_, exp.With):
        return query
    written = query
    query = _mark_calls(query, groups, reads, declared)
    with_ = query.args["with_"]
    spelled = [i for i, cte in enumerate(with_.expressions)
               if cte.alias.lower() in groups
               and any(_aggregates(t) for t in _recursive_terms(cte, groups, reads))]
    if not spelled:
        return written
    if query is written:
        query = query.copy()
    for i in spelled:
        _rewrite(query.args["with_"].expressions[i], sql, groups, reads)
    return query


def _mark_calls(query: exp.Query, groups: dict[str, set[str]], reads: Reads,
                declared: Callable[[str], bool]) -> exp.Query:
    """A copy of `query` whose recursive terms' calls of EVERY, SOME and declared aggregates
    are `TermCall`s; `query` itself when it has none."""
    def calls(q: exp.Query) -> list[exp.Anonymous]:
        return [c for cte in q.args["with_"].expressions if cte.alias.lower() in groups
                for term in _recursive_terms(cte, groups, reads)
                for c in term.find_all(exp.Anonymous)
                if not isinstance(c, TermCall) and (c.name.lower() in TERM_CALLS or declared(c.name))]
    if not calls(query):
        return query
    query = query.copy()
    for call in calls(query):
        marked = TermCall(this=call.name, expressions=[e.copy() for e in call.expressions])
        marked.meta.update(call.meta)
        call.replace(marked)
    return query


def _recursive_terms(cte: exp.CTE, groups, reads) -> list[exp.Query]:
    """The recursive terms of a set (UNION) CTE; none of a UNION ALL one."""
    branches, alls = branches_of(cte.this)
    if alls and all(alls):
        return []  # UNION ALL: each step aggregates the previous step's rows, as written
    members = groups[cte.alias.lower()]
    return [b for b in branches if reads(b, members)]


def _aggregates(term: exp.Query) -> TypeGuard[exp.Select]:
    return isinstance(term, exp.Select) and bool(term.args.get("group") or _own_aggregates(term))


def _own_aggregates(select: exp.Select) -> list[exp.AggFunc]:
    """Aggregates of `select` itself: not of a window function, not inside a nested query."""
    found = []
    for node in select.find_all(exp.AggFunc):
        if isinstance(node.parent, exp.Window):
            continue
        parent = node.parent
        while parent is not None and parent is not select and not isinstance(parent, exp.Query):
            parent = parent.parent
        if parent is select:
            found.append(node)
    return found


def _rewrite(cte: exp.CTE, sql: str, groups, reads) -> None:
    name = cte.alias
    terms = _recursive_terms(cte, groups, reads)
    spelled = [t for t in terms if _aggregates(t)]
    alias = cte.args["alias"]
    head = next((c for c in alias.columns if isinstance(c, AggregateColumn)), None)
    if head is not None:
        raise RecSQLAnalysisError(
            f"CTE `{name}` spells its aggregate twice: `{head.func}() AS {head.name}` in its head "
            "and an aggregate or GROUP BY in a recursive term; use one spelling: drop the head's "
            f"aggregate (write `{head.name}`) and keep the term's aggregate with GROUP BY (the "
            "spelling BI tools parse), or keep the head and drop the term's aggregate and GROUP BY",
            condition="RECSQL_MIXED_AGGREGATE_SPELLING",
            **_locate(_first_aggregation(spelled[0]), sql),
        )
    shapes = [_aggregated_columns(name, t, sql) for t in terms]
    model = shapes[terms.index(spelled[0])]
    for term, shape in zip(terms, shapes):
        if _signature(shape) != _signature(model):
            raise RecSQLAnalysisError(
                f"The recursive terms of CTE `{name}` aggregate differently ({_describe(model)} in "
                f"one, {_describe(shape)} in another): every recursive term must aggregate the same "
                "output columns with the same function and GROUP BY the others",
                condition="RECSQL_INCONSISTENT_RECURSIVE_AGGREGATES",
                **_locate(_first_aggregation(term) if _aggregates(term) else term, sql),
            )
    if model:
        heads = {c.position: c for c in model}
        names = _head_names(cte, spelled[0], sql)
        alias.set("columns", [_aggregate_column(n, heads[k], names) if k in heads else n
                              for k, n in enumerate(names)])
    for term, shape in zip(terms, shapes):
        for column in shape:
            column.node.replace(column.value.copy())
        term.set("group", None)


def _mapping(node: exp.Expr) -> TermAggregate | None:
    """What aggregate `node` of a recursive term means as a head aggregate, if anything."""
    if isinstance(node, TermCall):
        return TermAggregate(TERM_CALLS.get(node.name.lower(), node.name.lower()), _called)
    return TERM_AGGREGATES.get(type(node))


def _aggregate_column(name: exp.Identifier, column: _Column,
                      names: list[exp.Identifier]) -> AggregateColumn:
    of = names[column.of].copy() if column.of is not None else None
    head = AggregateColumn(this=name, func=column.mapping.head, of=of)
    meta = next((n.meta for n in column.node.walk() if n.meta.get("line") is not None), {})
    head.meta.update(meta)
    return head


def _signature(shape: list[_Column]) -> tuple[tuple[int, str, int | None], ...]:
    return tuple((c.position, c.mapping.head, c.of) for c in shape)


def _describe(shape: list[_Column]) -> str:
    if not shape:
        return "no aggregate"
    return ", ".join(f"{c.mapping.head.upper()} on output column {c.position + 1}" for c in shape)


def _first_aggregation(term: exp.Select) -> exp.Expr:
    aggregates = _own_aggregates(term)
    return aggregates[0] if aggregates else term.args["group"]


def _aggregated_columns(cte: str, term: exp.Query, sql: str) -> list[_Column]:
    """The aggregated output columns of a recursive term, after checking the term's shape."""
    if not isinstance(term, exp.Select) or not _aggregates(term):
        return []
    if term.args.get("having") is not None:
        raise RecSQLAnalysisError(
            f"A recursive term of CTE `{cte}` has HAVING; under UNION its aggregate is the CTE's "
            "head aggregate, which has no per-term filter: filter the final query "
            f"(`SELECT ... FROM {cte} WHERE ...`) or the term's rows with WHERE",
            condition="RECSQL_HAVING_IN_RECURSION",
            **_locate(term.args["having"], sql),
        )
    columns = []
    for node in _own_aggregates(term):
        columns.append(_aggregated_column(cte, term, node, sql))
    _check_group_by(cte, term, {c.position for c in columns}, sql)
    for column in columns:
        if column.mapping.follows is not None:
            column.of = _followed(cte, column, columns, sql)
    return sorted(columns, key=lambda c: c.position)


def _followed(cte: str, payload: _Column, columns: list[_Column], sql: str) -> int:
    """The position of the MIN(v) (MAX(v)) output column whose winner `MIN_BY(x, v)` carries."""
    follows = payload.mapping.follows or exp.Min  # never None: called on payloads only
    value = payload.node.expression
    for column in columns:
        if isinstance(column.node, follows) and _normalised(column.value) == _normalised(value):
            return column.position
    extremum = "MIN" if follows is exp.Min else "MAX"
    raise RecSQLAnalysisError(
        f"`{payload.node.sql('rasql')}` in a recursive term of CTE `{cte}` needs "
        f"`{extremum}({value.sql('rasql')})` as another output column of the same term: under "
        f"UNION it is a payload column that carries the winning row's value of that {extremum} "
        "(ties broken by the payload); add it, or compute the payload in the final query",
        condition="RECSQL_INVALID_PAYLOAD",
        **_locate(payload.node, sql),
    )


def _aggregated_column(cte: str, term: exp.Select, node: exp.AggFunc, sql: str) -> _Column:
    written = node.sql("rasql")
    if isinstance(node.parent, exp.Filter):
        raise _unsupported(cte, written, "a FILTER clause has no head meaning; move the "
                           "condition to the term's WHERE", node, sql)
    position = next((k for k, e in enumerate(term.expressions) if e is node or e.unalias() is node), None)
    if position is None:
        raise RecSQLAnalysisError(
            f"`{written}` in a recursive term of CTE `{cte}` is not a whole output column; under "
            "UNION a recursive term's aggregate is the CTE's head aggregate, so it must be an "
            f"output column by itself with the expression inside it (e.g. `MIN(p.cost + e.cost)`, "
            "not `MIN(p.cost) + e.cost`)",
            condition="RECSQL_AGGREGATE_NOT_WHOLE_COLUMN",
            **_locate(node, sql),
        )
    mapping = _mapping(node)
    if mapping is None:
        why = WHY_NOT.get(type(node), "recsql has no head aggregate for it")
        raise _unsupported(cte, written, why, node, sql)
    try:
        value = mapping.value(node)
    except Unmappable as why:
        raise _unsupported(cte, written, str(why), node, sql) from None
    return _Column(position, mapping, node, value)


def _unsupported(cte: str, written: str, why: str, node: exp.Expr, sql: str) -> RecSQLAnalysisError:
    return RecSQLAnalysisError(
        f"`{written}` in a recursive term of CTE `{cte}` cannot be a recursive aggregate: {why} "
        f"(a recursive term may aggregate with {SUPPORTED})",
        condition="RECSQL_UNSUPPORTED_HEAD_AGGREGATE",
        **_locate(node, sql),
    )


def _check_group_by(cte: str, term: exp.Select, aggregated: set[int], sql: str) -> None:
    outputs = term.expressions
    keys = [k for k in range(len(outputs)) if k not in aggregated]
    group = term.args.get("group")
    if group is None:
        if keys:
            raise _not_key(cte, f"it has no GROUP BY but aggregates beside `{outputs[keys[0]].sql('rasql')}`",
                           outputs[keys[0]], sql)
        return
    for kind in ("grouping_sets", "cube", "rollup"):
        if group.args.get(kind):
            raise _not_key(cte, f"its GROUP BY has {kind.upper().replace('_', ' ')}", group, sql)
    if group.args.get("all"):
        return  # GROUP BY ALL: every output column that is not an aggregate
    covered = set()
    for entry in group.expressions:
        k = _output_position(entry, outputs)
        if k is None or k in aggregated:
            raise _not_key(cte, f"`{entry.sql('rasql')}` in its GROUP BY is not one of its "
                           "non-aggregated output columns", entry, sql)
        covered.add(k)
    missing = [k for k in keys if k not in covered]
    if missing:
        raise _not_key(cte, f"its GROUP BY leaves out output column `{outputs[missing[0]].sql('rasql')}`",
                       outputs[missing[0]], sql)


def _not_key(cte: str, what: str, node: exp.Expr, sql: str) -> RecSQLAnalysisError:
    return RecSQLAnalysisError(
        f"A recursive term of CTE `{cte}` groups by something other than its key: {what}; "
        f"{GROUP_KEY_RULE}",
        condition="RECSQL_GROUP_BY_NOT_KEY",
        **_locate(node, sql),
    )


def _output_position(entry: exp.Expr, outputs: list[exp.Expr]) -> int | None:
    """Which output column a GROUP BY entry names: by position (1-based, as Spark's
    groupByOrdinal), by the same expression, or by the output column's alias."""
    if isinstance(entry, exp.Literal) and entry.is_int:
        k = int(entry.name) - 1
        return k if 0 <= k < len(outputs) else None
    wanted = _normalised(entry)
    for k, output in enumerate(outputs):
        if _normalised(output.unalias()) == wanted:
            return k
    if isinstance(entry, exp.Column) and not entry.table:
        for k, output in enumerate(outputs):
            if isinstance(output, exp.Alias) and output.alias.lower() == entry.name.lower():
                return k
    return None


def _locate(node: exp.Expr, sql: str) -> dict:
    """Where `node` starts in the text: its first-written part (`edge` of `edge.Dst`)."""
    placed = [n for n in node.walk() if n.meta.get("start") is not None]
    return locate(min(placed, key=lambda n: n.meta["start"]) if placed else node, sql)


def _normalised(node: exp.Expr) -> str:
    """A node's text with identifiers lower-cased (Spark resolves names case-insensitively)."""
    copy = node.copy()
    for identifier in copy.find_all(exp.Identifier):
        identifier.set("this", identifier.name.lower())
        identifier.set("quoted", False)
    return copy.sql("rasql")


def _head_names(cte: exp.CTE, first: exp.Query, sql: str) -> list[exp.Identifier]:
    """The CTE's column names: its column list, else its first branch's output names (as Spark
    names them), which must then be plain names."""
    alias = cte.args["alias"]
    width = len(first.selects)
    if alias.columns:
        names = [c.copy() for c in alias.columns]
        if len(names) != width:
            raise RecSQLAnalysisError(
                f"CTE `{cte.alias}` declares {len(names)} column(s) but its recursive term yields "
                f"{width}; make them agree",
                condition="RECSQL_HEAD_BRANCH_MISMATCH",
                **_locate(first, sql),
            )
        return names
    branches, _ = branches_of(cte.this)
    anchor = branches[0]
    names = []
    for output in anchor.selects if isinstance(anchor, exp.Select) else []:
        if isinstance(output, exp.Alias):
            names.append(output.args["alias"].copy())
        elif isinstance(output, exp.Column) and not output.is_star:
            names.append(output.this.copy())
        else:
            break
    if len(names) != width:
        raise RecSQLAnalysisError(
            f"CTE `{cte.alias}` aggregates in a recursive term, so its columns need names: give "
            f"it a column list, e.g. `{cte.alias} (dst, cost) AS (...)`, or name every output "
            "column of its first term (`SELECT 1 AS dst, 0 AS cost`)",
            condition="RECSQL_AGGREGATE_NEEDS_COLUMN_NAMES",
            **_locate(cte.args["alias"], sql),
        )
    return names
