"""Which scalar subqueries of a recursive branch the planner marks loop-invariant (issue 38,
planner/invariants.py): those that read no relation of the branch's own group and call nothing
whose value changes between evaluations. No Spark: what is marked is read from the plan."""

from __future__ import annotations

import pytest

from recsql.parser import parse_statement
from recsql.planner import DictCatalog, plan_query, render_plan

CATALOG = DictCatalog({"edge": ["Src", "Dst", "Cost"], "nodes": ["X"]})


def marked(query: str) -> list[str]:
    """The marked subqueries of every branch, as the plan shows them."""
    plan = plan_query(parse_statement(query).expression, query, CATALOG)
    assert plan is not None
    return [s.sql("rasql")
            for g in plan.groups for c in g.ctes for b in c.branches for s in b.invariants]


def sssp_where(condition: str) -> str:
    return ("WITH RECURSIVE path(Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
            "(SELECT e.Dst, p.Cost + e.Cost FROM path AS p JOIN edge AS e ON p.Dst = e.Src "
            f"WHERE {condition}) SELECT * FROM path")


def test_an_aggregate_over_a_base_table_is_marked_and_shown():
    query = sssp_where("e.Cost < (SELECT avg(Cost) FROM edge)")
    assert marked(query) == ["(SELECT AVG(Cost) FROM edge)"]
    plan = plan_query(parse_statement(query).expression, query, CATALOG)
    assert "evaluated once, before the loop: (SELECT AVG(Cost) FROM edge)" in render_plan(plan)


def test_a_subquery_over_an_earlier_cte_is_marked():
    query = ("WITH RECURSIVE a(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM a WHERE n < 5), "
             "r(m) AS (SELECT 0 UNION ALL SELECT m + (SELECT max(n) FROM a) FROM r WHERE m < 20) "
             "SELECT * FROM r")
    assert marked(query) == ["(SELECT MAX(n) FROM {rq_cte_a} AS `a`)"]


def test_only_the_outermost_of_nested_subqueries_is_marked():
    query = sssp_where("e.Cost < (SELECT max(Cost) FROM edge WHERE Cost < (SELECT avg(Cost) FROM edge))")
    assert marked(query) == ["(SELECT MAX(Cost) FROM edge WHERE Cost < (SELECT AVG(Cost) FROM edge))"]


def test_a_base_branch_is_not_marked():
    query = ("WITH RECURSIVE r(m) AS (SELECT (SELECT max(X) FROM nodes) UNION ALL SELECT m + 1 FROM r "
             "WHERE m < 20) SELECT * FROM r")
    assert marked(query) == []


@pytest.mark.parametrize("condition", [
    "e.Src IN (SELECT X FROM nodes)",  # IN, EXISTS: not scalar
    "EXISTS (SELECT X FROM nodes WHERE X = 3)",
    "e.Cost < (SELECT max(x.Cost) FROM edge AS x WHERE x.Src = p.Dst)",  # correlated by its qualifier
    "e.Cost < (SELECT max(Cost) + rand() FROM edge)",  # another value at each evaluation
    "e.Cost < (SELECT max(Cost) + rand(7) FROM edge)",  # Spark shifts the seed at every step
    "e.Cost < (SELECT max(Cost) FROM edge WHERE uuid() <> '')",
    "e.Cost < (SELECT max(Cost) FROM edge WHERE current_timestamp() > DATE'2020-01-01')",
    "e.Cost < (SELECT first(Cost) FROM edge)",  # Spark's own non-deterministic aggregate
    "e.Cost < (SELECT my_udf(max(Cost)) FROM edge)",  # a function sqlglot does not know
    "e.Cost < (SELECT max(Cost) FROM edge TABLESAMPLE (50 PERCENT))",
])
def test_what_is_not_marked(condition):
    assert marked(sssp_where(condition)) == []


def test_a_subquery_reading_the_recursion_is_not_marked():
    # Spark's one-row term: the subquery reads the previous step
    query = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT (SELECT n + 1 FROM t WHERE n < 5)) SELECT * FROM t"
    assert marked(query) == []
