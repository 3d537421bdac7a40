"""A LIMIT Spark pushes into a UNION ALL recursion ends it, once per read; no Spark."""

from __future__ import annotations

import pytest

from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, plan_query

NATURALS = "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t1) "


def targets(q):
    plan = plan_query(parse_statement(q).expression, q, DictCatalog({}))
    return {s.ctes[0].name: s.row_target for s in plan.steps if isinstance(s, GroupStep)}


@pytest.mark.parametrize("final, expected", [
    # each limited read is evaluated on its own, as Spark does: one copy per read
    ("SELECT (SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 5)), "
     "(SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 3))", {"t1__limit1": 5, "t1__limit2": 3}),
    # a LIMIT on a UNION ALL is pushed into both sides
    ("((SELECT n FROM t1) UNION ALL (SELECT n FROM t1)) LIMIT 20",
     {"t1__limit1": 20, "t1__limit2": 20}),
    # an unlimited read keeps the original, which runs to its end
    ("SELECT (SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 5)), (SELECT count(*) FROM t1)",
     {"t1": None, "t1__limit1": 5}),
    # ORDER BY on the UNION, or UNION DISTINCT, needs every row first
    ("(SELECT n FROM t1) UNION ALL (SELECT n FROM t1) ORDER BY n LIMIT 20", {"t1": None}),
    ("(SELECT n FROM t1) UNION (SELECT n FROM t1) LIMIT 20", {"t1": None}),
    # a single read is limited in place
    ("SELECT n FROM t1 LIMIT 7 OFFSET 2", {"t1": 9}),
])
def test_each_limited_read_of_a_union_all_recursion_gets_its_own_target(final, expected):
    assert targets(NATURALS + final) == expected


def test_limited_reads_from_another_recursive_cte_are_pushed_too():
    q = (NATURALS.rstrip() + ", t2(m) AS (SELECT (SELECT SUM(n) FROM (SELECT n FROM t1 LIMIT 10) AS s) "
         "UNION ALL SELECT m + (SELECT SUM(n) FROM (SELECT n FROM t1 LIMIT 3) AS s) FROM t2) "
         "SELECT * FROM t2 LIMIT 20")
    assert targets(q) == {"t1__limit1": 10, "t1__limit2": 3, "t2": 20}


def test_a_copy_reads_itself_and_keeps_the_readers_qualifiers():
    q = NATURALS + "SELECT (SELECT max(t1.n) FROM (SELECT t1.n FROM t1 LIMIT 5) AS x), (SELECT n FROM t1 LIMIT 1)"
    plan = plan_query(parse_statement(q).expression, q, DictCatalog({}))
    copy = next(c for s in plan.steps if isinstance(s, GroupStep) for c in s.ctes if c.name == "t1__limit1")
    assert [b.recursive for b in copy.branches] == [False, True]
    assert "t1__limit1" in plan.final.sql() and "t1__limit2" in plan.final.sql()


def test_a_set_recursion_is_not_cut_short():
    q = ("WITH RECURSIVE t1(n) AS (SELECT 1 UNION SELECT n % 5 + 1 FROM t1) "
         "SELECT (SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 5)), (SELECT SUM(n) FROM (SELECT * FROM t1 LIMIT 3))")
    assert set(targets(q).values()) == {None}


NESTED = ("WITH RECURSIVE q AS (SELECT * FROM d UNION ALL (WITH RECURSIVE x AS (SELECT * FROM d "
          "UNION ALL (SELECT * FROM q UNION ALL SELECT * FROM x)) SELECT * FROM x)) ")


@pytest.mark.parametrize("final, expected", [
    # q and the recursion nested in its term form one group: q's one outside read is limited
    ("SELECT * FROM q LIMIT 32", (32, "q")),
    # another, unlimited read of q needs all of it
    ("SELECT * FROM (SELECT * FROM q LIMIT 32) UNION ALL SELECT * FROM q", (None, None)),
])
def test_a_limit_ends_a_mutually_recursive_union_all_group(final, expected):
    q = NESTED + final
    plan = plan_query(parse_statement(q).expression, q, DictCatalog({"d": ["id"]}))
    (group,) = [s for s in plan.steps if isinstance(s, GroupStep)]
    assert len(group.ctes) == 2
    assert (group.row_target, group.row_target_cte) == expected
