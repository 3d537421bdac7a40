"""The readable text form of a plan (what EXPLAIN shows before Spark's physical plan)."""

from __future__ import annotations

from recsql.planner.model import DELTA, Branch, CTEPlan, QueryPlan, ViewStep


def render_plan(plan: QueryPlan) -> str:
    lines = ["== Recursive plan ==", *plan.demand]
    for step in plan.steps:
        if isinstance(step, ViewStep):
            lines.append(f"stratum {step.stratum}: view {step.name} = {_sql(step.query)}")
            continue
        kind = "recursive group" if step.recursive else "aggregate (no recursion)"
        lines.append(f"stratum {step.stratum}: {kind} [{', '.join(step.names)}]")
        for cte in step.ctes:
            lines.extend("  " + line for line in _cte_lines(cte))
    lines.append(f"final query: {_sql(plan.final)}")
    return "\n".join(lines)


def _cte_lines(cte: CTEPlan) -> list[str]:
    head = ", ".join(c.render() for c in cte.head)
    aggregates = ", ".join(_aggregate(cte, c) for c in cte.aggregates) or "none"
    semantics = "bag (UNION ALL)" if cte.bag else ("set (UNION)" if not cte.aggregates else "aggregate")
    lines = [
        f"{cte.name}({head})",
        f"  semantics: {semantics}",
        f"  group key / partition key: ({', '.join(cte.partition_key)})",
        f"  aggregated columns: {aggregates}",
    ]
    for branch in cte.branches:
        lines.extend("  " + line for line in _branch_lines(cte, branch))
    if cte.doubling is not None:
        lines.append("  transitive closure: after spark.recsql.doubling.afterIterations linear "
                     "iterations, one round of the whole relation with itself, then recursive "
                     "doubling:")
        lines.extend("  " + line for line in _branch_lines(cte, cte.doubling))
    return lines


def _aggregate(cte: CTEPlan, column) -> str:
    """`min(Cost)`, or `min(Cost) with payload (Pred)`: the tuple compared is (Cost, Pred)."""
    payload = cte.payload(column)
    text = f"{column.agg}({column.name})"
    return f"{text} with payload ({', '.join(c.name for c in payload)})" if payload else text


def _branch_lines(cte: CTEPlan, branch: Branch) -> list[str]:
    kind = "recursive" if branch.recursive else "base"
    lines = [f"branch {branch.index} ({kind}): {_sql(branch.select)}"]
    for number, variant in enumerate(branch.variants, start=1):
        reads = ", ".join(
            f"{ref.alias}={'Δ' if role == DELTA else ''}{ref.cte}" for ref, role in zip(branch.refs, variant)
        )
        lines.append(f"  delta rule {number}: Δ{cte.name} <- {reads}")
    for base in branch.bases:
        keys = ", its distinct keys alone" if base.keys_only else ""
        lines.append(f"  base {base.table} pre-partitioned by ({', '.join(base.columns)}){keys}")
    for subquery in branch.invariants:
        lines.append(f"  evaluated once, before the loop: {_sql(subquery)}")
    if branch.contributor:
        lines.append(f"  contributor: ({', '.join(_sql(e) for e in branch.contributor)})")
    return lines


def _sql(node) -> str:
    return node.sql("rasql")
