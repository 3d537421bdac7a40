"""The pieces of a CTE body every planner module reads: its UNION branches, and the
placeholder table that binds a reference to a DataFrame. A leaf: it imports no planner module."""

from __future__ import annotations

from sqlglot import exp


def branches_of(body: exp.Query) -> tuple[list[exp.Query], list[bool]]:
    """Flatten `b1 UNION [ALL] b2 ...` into its branches and, per separator, whether it is ALL."""
    if isinstance(body, exp.Union) and not has_modifiers(body):
        left, left_all = branches_of(body.this)
        right, right_all = branches_of(body.expression)
        return left + right, left_all + [not body.args.get("distinct")] + right_all
    if isinstance(body, exp.Subquery) and not body.alias and isinstance(body.this, exp.Query):
        return branches_of(body.this)
    return [body], []


def has_modifiers(query: exp.Expr) -> bool:
    return any(query.args.get(k) for k in ("order", "limit", "offset"))


def bound_table(binding: str, alias: str) -> exp.Table:
    return exp.Table(
        this=exp.Placeholder(this=exp.to_identifier(binding), widget=True),
        alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
    )


def sources(select: exp.Select) -> list[exp.Expr]:
    """The relations a SELECT reads directly, in order: its FROM and its joins (not those of its
    subqueries: sqlglot's `Scope.sources` names a scope's sources by alias, and so cannot list a
    relation read twice under one name, nor say which came first)."""
    from_ = select.args.get("from_")
    found = [from_.this] if from_ is not None else []
    return found + [j.this for j in select.args.get("joins") or []]
