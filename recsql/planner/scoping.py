"""A WITH nested inside a recursive CTE's body, resolved by SQL scoping (the innermost
definition of a name wins), rewritten away before planning:

- a non-recursive inner CTE is inlined where its scope reads it, as a derived table;
- a recursive inner CTE is hoisted to the top-level WITH under a fresh name, and the references
  in its scope are renamed, so it becomes a recursive group of its own that the outer one reads.

A leaf: it imports no other planner module."""

from __future__ import annotations

from itertools import count
from typing import TypeVar

from sqlglot import exp

E = TypeVar("E", bound=exp.Expr)


def hoist_nested_withs(query: E) -> E:
    """`query` (a statement with a top-level WITH) without WITHs nested in its CTE bodies."""
    with_ = query.args.get("with_")
    if not isinstance(with_, exp.With):
        return query
    names = {c.alias.lower() for c in with_.expressions}
    if not any(_needs_hoisting(c, names) for c in with_.expressions):
        return query  # e.g. a recursion nested in a plain CTE: Spark runs it as it is
    query = query.copy()
    with_ = query.args["with_"]
    fresh = count(1)
    ctes: list[exp.CTE] = []
    pending = list(with_.expressions)
    while pending:
        cte = pending.pop(0)
        inner = _nested(cte)
        if inner is None:
            ctes.append(cte)
            continue
        hoisted = _resolve(inner, fresh)
        pending[:0] = [*hoisted, cte]  # hoisted CTEs come first (and may nest further)
    with_.set("expressions", ctes)
    return query


def _needs_hoisting(cte: exp.CTE, top_names: set[str]) -> bool:
    """A nested WITH inside a CTE that is recursive (reads its own name) or whose inner names
    shadow top-level ones: without scoping the planner would misread those references."""
    inner = _nested(cte)
    if inner is None:
        return False
    inner_names = {c.alias.lower() for c in inner.expressions}
    return _reads(cte.this, cte.alias.lower()) or bool(inner_names & top_names)


def _nested(cte: exp.CTE) -> exp.With | None:
    return next((w for w in cte.this.find_all(exp.With)), None)


def _resolve(inner: exp.With, fresh) -> list[exp.CTE]:
    owner = inner.parent
    if owner is None:  # never: `inner` was found under a CTE's body, so it has a parent
        raise AssertionError("a nested WITH without a parent")
    hoisted = []
    for cte in inner.expressions:
        name = cte.alias.lower()
        if _reads(cte.this, name):
            new_name = f"{cte.alias}__scope{next(fresh)}"
            rename_reads(owner, name, new_name)
            alias = cte.args["alias"].copy()
            alias.set("this", exp.to_identifier(new_name))
            hoisted.append(exp.CTE(this=cte.this, alias=alias))
        else:
            _inline(owner, name, cte)
    owner.set("with_", None)
    return hoisted


def _reads(node: exp.Expr, name: str) -> bool:
    return any(_is_named(t, name) for t in node.find_all(exp.Table))


def _is_named(table: exp.Table, name: str) -> bool:
    return not table.args.get("db") and isinstance(table.this, exp.Identifier) \
        and table.name.lower() == name


def rename_reads(scope: exp.Expr, name: str, new_name: str) -> None:
    """Point every unqualified read of `name` in `scope` at `new_name`, keeping `name` as its
    alias so that columns qualified with it still resolve."""
    for table in list(scope.find_all(exp.Table)):
        if _is_named(table, name):
            table.set("this", exp.to_identifier(new_name))
            if not table.args.get("alias"):
                table.set("alias", exp.TableAlias(this=exp.to_identifier(name)))


def _inline(scope: exp.Expr, name: str, cte: exp.CTE) -> None:
    columns = cte.args["alias"].columns
    for table in list(scope.find_all(exp.Table)):
        if _is_named(table, name) and not _inside(table, cte):
            alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name),
                                   columns=[c.copy() for c in columns] or None)
            table.replace(exp.Subquery(this=cte.this.copy(), alias=alias))


def _inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False
