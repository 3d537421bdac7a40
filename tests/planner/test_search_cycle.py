"""The SEARCH/CYCLE rewrite without Spark: the rewritten CTE and the errors, with positions.
(Answers are checked against PostgreSQL in tests/compat/test_postgres_search_cycle.py.)"""

from __future__ import annotations

import pytest

from recsql.errors import RecSQLAnalysisError
from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, plan_query

CATALOG = DictCatalog({"e": ["f", "t", "label"]})
WALK = ("WITH RECURSIVE g AS (SELECT * FROM e UNION ALL SELECT e.* FROM e, g WHERE e.f = g.t)\n"
        "{clauses}\nSELECT * FROM g")


def plan(q):
    return plan_query(parse_statement(q).expression, q, CATALOG)


def analysis_error(q) -> RecSQLAnalysisError:
    with pytest.raises(RecSQLAnalysisError) as info:
        plan(q)
    return info.value


def test_the_cte_gets_the_clause_columns_after_its_own():
    p = plan(WALK.format(clauses="SEARCH BREADTH FIRST BY f SET seq CYCLE f, t SET m USING p"))
    (step,) = [s for s in p.steps if isinstance(s, GroupStep)]
    assert [c.name for c in step.ctes[0].head] == ["f", "t", "label", "seq", "m", "p"]
    assert step.ctes[0].bag  # still a UNION ALL recursion, run as any other
    recursive = step.ctes[0].branches[1].select.sql("rasql")
    assert "ARRAY_CONTAINS" in recursive and "`*DEPTH*` + 1" in recursive


@pytest.mark.parametrize(("clauses", "message", "where"), [
    ("CYCLE f, nope SET m USING p", 'cycle column "nope" not in WITH query column list', (2, 9)),
    ("SEARCH DEPTH FIRST BY t, t SET s", 'search column "t" specified more than once', (2, 25)),
    ("CYCLE f SET label USING p", 'cycle mark column name "label" already used', (2, 12)),
    ("CYCLE f SET m TO 1 DEFAULT 'x' USING p", "CYCLE types integer and string cannot be matched",
     (2, 27)),
    ("SEARCH DEPTH FIRST BY f SET x CYCLE f SET m USING x",
     "search sequence column name and cycle path column name are the same", (2, 50)),
])
def test_postgresql_error_cases_with_their_position(clauses, message, where):
    error = analysis_error(WALK.format(clauses=clauses))
    assert message in str(error)
    assert (error.line, error.pos) == where


def test_a_clause_on_a_cte_that_is_not_recursive_is_an_error():
    error = analysis_error("WITH a AS (SELECT 1 AS x UNION ALL SELECT 2) CYCLE x SET m USING p "
                           "SELECT * FROM a")
    assert "is not recursive" in str(error)


def test_head_aggregates_and_clauses_do_not_mix():
    error = analysis_error("WITH RECURSIVE p(d, min() AS c) AS (SELECT 1, 0 UNION SELECT e.t, p.c + 1 "
                           "FROM p, e WHERE p.d = e.f) CYCLE d SET m USING q SELECT * FROM p")
    assert "head aggregates" in str(error)
