"""WITH nested in a recursive CTE resolves names by SQL scoping (innermost wins); no Spark."""

from __future__ import annotations

from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, plan_query


def groups(q):
    plan = plan_query(parse_statement(q).expression, q, DictCatalog({}))
    return [[(c.name, [b.recursive for b in c.branches]) for c in s.ctes]
            for s in plan.steps if isinstance(s, GroupStep)]


def test_with_inside_the_recursive_term_is_inlined_and_stays_recursive():
    q = ("WITH RECURSIVE o AS (SELECT 0 AS level UNION ALL (WITH i AS (SELECT * FROM o) "
         "SELECT level + 1 FROM i WHERE level < 5)) SELECT * FROM o")
    assert groups(q) == [[("o", [False, True])]]


def test_recursion_nested_in_the_anchor_becomes_its_own_group_read_by_the_outer_one():
    q = ("WITH RECURSIVE t AS (WITH RECURSIVE s AS (VALUES (1) AS v(i) UNION ALL SELECT i + 1 FROM s "
         "WHERE i < 10) SELECT i AS j FROM s UNION ALL SELECT j + 1 FROM t WHERE j < 10) SELECT * FROM t")
    assert groups(q) == [[("s__scope1", [False, True])], [("t", [False, True])]]


def test_inner_name_shadows_the_outer_one_in_its_scope_only():
    # the inner r scopes the first branch only: the second branch reads the outer r
    q = ("WITH RECURSIVE r(level) AS ((WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL "
         "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r) UNION ALL "
         "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r")
    assert groups(q) == [[("r__scope1", [False, True])], [("r", [False, True])]]


def test_inner_name_over_a_whole_body_makes_the_outer_cte_non_recursive():
    q = ("WITH RECURSIVE r(level) AS (WITH RECURSIVE r(level) AS (VALUES (0) UNION ALL "
         "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r UNION ALL "
         "SELECT level + 1 FROM r WHERE level < 10) SELECT * FROM r")
    assert groups(q) == [[("r__scope1", [False, True])]]
