"""A LIMIT that ends a recursion, where Spark pushes it into the recursion.

A read of a recursive CTE `r` as `SELECT <projection> FROM r LIMIT n [OFFSET m]` (no ORDER BY,
filter, grouping, join, DISTINCT or subquery; the LIMIT may also sit on a UNION ALL around the
read) lets `r` stop once n + m rows exist. Spark evaluates each read of a recursive CTE on its
own, with its own pushed LIMIT; so when `r` is read more than once, each limited read gets a copy
of `r` under a fresh name (`r__limit1`, ...) with its own row target, and unlimited reads keep
`r`. Whether the target applies (UNION ALL recursion only) is the planner's decision.

A leaf but for scoping's name helpers."""

from __future__ import annotations

from itertools import count
from typing import TypeVar

from sqlglot import exp

from recsql.planner.scoping import _inside, _is_named, rename_reads

E = TypeVar("E", bound=exp.Expr)

BLOCKERS = ("order", "where", "group", "having", "joins", "distinct", "qualify", "windows")


def split_limited_reads(query: E, recursive: set[str],
                        groups: dict[str, set[str]] | None = None) -> tuple[E, dict[str, int]]:
    """`query` with a CTE copy per limited read (when `r` is read more than once), and the row
    target of each limited CTE by key. `recursive`: keys of CTEs that are recursive on their own
    (a group of one), the only ones a copy can stand for. `groups`: each member of a mutually
    recursive group, with its group's keys: such a member gets a target only when the one read
    of it from outside its group is limited (reads inside the group are the recursion itself),
    and no copy."""
    groups = groups or {}
    with_ = query.args.get("with_")
    if not isinstance(with_, exp.With) or not (recursive or groups):
        return query, {}
    if not any(_pushed_limit(t) is not None for t in query.find_all(exp.Table)):
        return query, {}
    query = query.copy()
    with_ = query.args["with_"]
    fresh = count(1)
    targets: dict[str, int] = {}
    for cte in list(with_.expressions):
        key = cte.alias.lower()
        if key in groups:
            members = [c for c in with_.expressions if c.alias.lower() in groups[key]]
            outside = [t for t in query.find_all(exp.Table)
                       if _is_named(t, key) and not any(_inside(t, m) for m in members)]
            if len(outside) == 1 and (limit := _pushed_limit(outside[0])) is not None:
                targets[key] = limit
            continue
        if key not in recursive:
            continue
        reads = [t for t in query.find_all(exp.Table) if _is_named(t, key) and not _inside(t, cte)]
        limits = [_pushed_limit(t) for t in reads]
        if len(reads) == 1 and limits[0] is not None:
            targets[key] = limits[0]
            continue
        for table, limit in zip(reads, limits):
            if limit is not None and len(reads) > 1:
                name = _add_copy(with_, cte, f"{cte.alias}__limit{next(fresh)}")
                _read_from(table, name)
                targets[name.lower()] = limit
        if len(reads) > 1 and None not in limits:  # every read has its copy: `r` is not run
            with_.set("expressions", [c for c in with_.expressions if c is not cte])
    return query, targets


def _pushed_limit(table: exp.Table) -> int | None:
    """n + m if `table` is the only source of a SELECT that Spark pushes a LIMIT n OFFSET m into."""
    select = table.parent.parent if isinstance(table.parent, exp.From) else None
    if not isinstance(select, exp.Select) or any(select.args.get(k) for k in BLOCKERS):
        return None
    if any(e.find(exp.AggFunc, exp.Window, exp.Subquery) for e in select.expressions):
        return None
    node: exp.Expr | None = select
    while node is not None:
        if node.args.get("limit") is not None or node.args.get("order") is not None:
            return _rows(node)
        parent = node.parent
        if isinstance(parent, exp.Union) and not parent.args.get("distinct") \
                or isinstance(parent, exp.Subquery) and not parent.alias:
            node = parent
        else:
            return None
    return None


def _rows(node: exp.Expr) -> int | None:
    """LIMIT n OFFSET m on `node` as n + m, if both are integer literals and nothing orders it."""
    limit, offset = node.args.get("limit"), node.args.get("offset")
    values = [limit.expression if limit is not None else None,
              offset.expression if offset is not None else exp.Literal.number(0)]
    if node.args.get("order") is not None:
        return None
    total = 0
    for value in values:
        if not (isinstance(value, exp.Literal) and value.is_int):
            return None
        total += int(value.this)
    return total


def _add_copy(with_: exp.With, cte: exp.CTE, name: str) -> str:
    copy = cte.copy()
    rename_reads(copy.this, cte.alias.lower(), name)
    copy.args["alias"].set("this", exp.to_identifier(name))
    copy.meta.update(cte.meta)
    with_.set("expressions", [*with_.expressions, copy])
    return name


def _read_from(table: exp.Table, name: str) -> None:
    if not table.args.get("alias"):
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
    table.set("this", exp.to_identifier(name))
