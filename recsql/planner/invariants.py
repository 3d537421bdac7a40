"""Scalar subqueries of a recursive branch whose value no iteration changes (issue 38).

`WHERE e.cost < (SELECT avg(cost) FROM edge)` reads no relation of the branch's own recursive
group: the tables it reads are complete before the group's loop starts (base tables, and CTEs of
earlier strata), so its value is the same at every iteration. Spark evaluates it again in every
iteration's query, and, while it is there, the driver endgame cannot take the branch (its
allowlist has no subquery). The planner marks such subqueries (`INVARIANT` in the node's meta,
which survives the copies every stage makes); the executor evaluates each once, before the
group's loop, and runs the branch with its value as a constant (`executor/loop/invariants.py`).

What the planner can tell without Spark it decides here: a scalar subquery (not IN, EXISTS,
ANY/ALL or a derived table) that reads no reference to its group, calls nothing whose value
changes from one evaluation to the next, and names no outer relation by its qualifier. Whether
an unqualified column is an outer one depends on the tables' columns: the executor's Spark
analysis of the subquery alone settles it (an outer column does not resolve there, and the
subquery stays in the branch).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from sqlglot import exp

from recsql.planner.seeds import is_seeded, non_deterministic

INVARIANT = "recsql_invariant"

# What may give another value at each evaluation, beyond `seeds.NON_DETERMINISTIC`: a random
# function even unseeded (Spark re-seeds a recursive term's seeded ones at every step, subqueries
# included), Spark's non-deterministic aggregates (first, last, any_value) and those whose result
# depends on the rows' order (collect_list, collect_set), a sample, and a function sqlglot does
# not know (a user's function may be non-deterministic): such a subquery is left as written.
_VARYING: tuple[type[exp.Expr], ...] = (
    exp.Rand, exp.Randn, exp.Uniform, exp.Randstr, exp.Uuid, exp.First, exp.Last, exp.FirstValue,
    exp.LastValue, exp.AnyValue, exp.ArrayAgg, exp.ArrayUniqueAgg, exp.TableSample, exp.Anonymous,
)
# Parents of a subquery that is not a scalar one: a relation, or a predicate over its rows
_NOT_SCALAR = (exp.From, exp.Join, exp.Lateral, exp.Exists, exp.Any, exp.All, exp.SetOperation,
               exp.CTE, exp.Subquery)


def mark_invariant_subqueries(select: exp.Expr, references: Collection[str]) -> None:
    """Mark each outermost scalar subquery of the recursive branch `select` that is invariant
    (see the module); `references`: the bindings of the branch's references to its group."""
    for subquery in _outermost(select, set(references)):
        subquery.meta[INVARIANT] = True


def invariant_subqueries(select: exp.Expr) -> list[exp.Subquery]:
    """The subqueries of `select` the planner marked invariant, in the order `find_all` meets them."""
    return [s for s in select.find_all(exp.Subquery) if s.meta.get(INVARIANT)]


def _outermost(node: exp.Expr, references: set[str]) -> Iterator[exp.Subquery]:
    for child in node.iter_expressions():
        if isinstance(child, exp.Subquery) and _scalar(child) and _invariant(child, references):
            yield child
        else:
            yield from _outermost(child, references)


def _scalar(subquery: exp.Subquery) -> bool:
    parent = subquery.parent
    if isinstance(parent, _NOT_SCALAR) or (isinstance(parent, exp.In) and subquery.arg_key == "query"):
        return False
    return not subquery.alias and isinstance(subquery.this, exp.Query)


def _invariant(subquery: exp.Subquery, references: set[str]) -> bool:
    if subquery.find(*_VARYING) is not None or non_deterministic(subquery) or is_seeded(subquery):
        return False
    tables = list(subquery.find_all(exp.Table))
    if any(isinstance(t.this, exp.Placeholder) and t.this.name in references for t in tables):
        return False
    # the names its own relations go by: a column qualified by any other is an outer one
    inner = {t.alias_or_name.lower() for t in tables}
    inner |= {s.alias.lower() for s in subquery.find_all(exp.Subquery, exp.Values) if s.alias}
    inner |= {c.alias.lower() for c in subquery.find_all(exp.CTE)}
    return all(not c.table or c.table.lower() in inner for c in subquery.find_all(exp.Column))
