"""Recursive doubling for transitive closure (Afrati et al., section 4.2).

A linear closure `tc(A, B) <- E(A, B); tc(A, B) <- tc(A, Z), E(Z, B)` needs as many iterations as
the longest shortest path. The non-linear rule `tc(A, B) <- tc(A, Z), tc(Z, B)` derives the same
set (the transitive closure of E) in about log2 of that many. The planner recognises the linear
forms (right-linear as above, or left-linear `E(A, Z), tc(Z, B)`) of a set-semantics CTE and
attaches the doubling rule; the executor switches to it once the linear recursion has proved deep
(`spark.recsql.doubling.afterIterations`), with one round of the whole relation joined with itself
so that the semi-naive doubling rules start from a state closed under composition.
"""

from __future__ import annotations

from sqlglot import exp

from recsql.planner.branches import bound_table
from recsql.planner.model import ALL, DELTA, Branch, CTEPlan, Ref
from recsql.planner.names import TableName

LEFT, RIGHT = "rq_l", "rq_r"  # aliases of the two references in the doubling rule


def doubling_branch(cte: CTEPlan) -> Branch | None:
    """The doubling rule for `cte` if it is a linear transitive closure of one table, else None."""
    if cte.bag or cte.aggregates or len(cte.head) != 2:
        return None
    if len(cte.base_branches) != 1 or len(cte.recursive_branches) != 1:
        return None
    edge = _edge_columns(cte.base_branches[0].select)
    linear = cte.recursive_branches[0]
    if edge is None or not _is_linear_closure(cte, linear, *edge):
        return None
    return Branch(
        index=linear.index,
        select=_self_join(*cte.columns),
        refs=(Ref("rq_r0", cte.key, LEFT), Ref("rq_r1", cte.key, RIGHT)),
        variants=((DELTA, ALL), (ALL, DELTA)),
    )


def switch_variants(branch: Branch) -> tuple[tuple[str, ...], ...]:
    """The round that switches to doubling joins the whole relation with itself once."""
    return ((ALL,) * len(branch.refs),)


def _edge_columns(select: exp.Expr) -> tuple[TableName, str, str] | None:
    """(table, source column, target column) of a base branch `SELECT x, y FROM t`."""
    if not isinstance(select, exp.Select) or has_clauses(select):
        return None
    table = select.args["from_"].this if select.args.get("from_") else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    columns = [e.unalias() for e in select.expressions]
    if len(columns) != 2 or not all(isinstance(c, exp.Column) for c in columns):
        return None
    return TableName.of(table), columns[0].name.lower(), columns[1].name.lower()


def _is_linear_closure(cte: CTEPlan, branch: Branch, table: TableName, source: str, target: str) -> bool:
    """`SELECT tc.A, e.target FROM tc, e WHERE tc.B = e.source` (right-linear) or
    `SELECT e.source, tc.B FROM e, tc WHERE e.target = tc.A` (left-linear), nothing else."""
    select = branch.select
    if len(branch.refs) != 1 or len(branch.bases) != 1 or branch.bases[0].table != table:
        return False
    if not isinstance(select, exp.Select) or has_clauses(select, "joins", "where"):
        return False
    condition = single_equality(select)
    outputs = [e.unalias() for e in select.expressions]
    if condition is None or len(outputs) != 2 or not all(isinstance(c, exp.Column) for c in outputs):
        return False
    ref, edge = branch.refs[0].alias.lower(), _alias(select, branch.bases[0].binding)
    a, b = (c.lower() for c in cte.columns)
    named = {(c.table.lower(), c.name.lower()) for c in condition}
    shape = [(c.table.lower(), c.name.lower()) for c in outputs]
    right = shape == [(ref, a), (edge, target)] and named == {(ref, b), (edge, source)}
    left = shape == [(edge, source), (ref, b)] and named == {(edge, target), (ref, a)}
    return right or left


def has_clauses(select: exp.Select, *allowed: str) -> bool:
    clauses = ("joins", "where", "group", "having", "qualify", "order", "limit", "offset",
               "distinct", "windows", "laterals")
    return any(select.args.get(k) for k in clauses if k not in allowed)


def single_equality(select: exp.Select) -> tuple[exp.Column, exp.Column] | None:
    """The branch's only condition, if it is `column = column` (in WHERE or a join's ON)."""
    conditions = [select.args["where"].this] if select.args.get("where") else []
    for join in select.args.get("joins") or []:
        if join.args.get("using") or join.side or join.kind not in ("", "CROSS", "INNER"):
            return None
        if join.args.get("on"):
            conditions.append(join.args["on"])
    if len(conditions) != 1 or not isinstance(conditions[0], exp.EQ):
        return None
    sides = (conditions[0].this, conditions[0].expression)
    return sides if all(isinstance(s, exp.Column) and s.table for s in sides) else None


def _alias(select: exp.Select, binding: str) -> str:
    for table in select.find_all(exp.Table):
        if isinstance(table.this, exp.Placeholder) and table.this.name == binding:
            return table.alias_or_name.lower()
    return ""


def _self_join(a: str, b: str) -> exp.Select:
    """SELECT rq_l.A, rq_r.B FROM {rq_r0} rq_l, {rq_r1} rq_r WHERE rq_l.B = rq_r.A"""

    def col(name: str, table: str) -> exp.Column:
        return exp.column(name, table=table, quoted=True)

    return (
        exp.select(col(a, LEFT), col(b, RIGHT))
        .from_(bound_table("rq_r0", LEFT))
        .join(bound_table("rq_r1", RIGHT), join_type="cross")
        .where(exp.EQ(this=col(b, LEFT), expression=col(a, RIGHT)))
    )
