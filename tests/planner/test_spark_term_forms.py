"""Two forms of Spark's recursive terms, without Spark: seeded random functions re-seeded per
iteration (recsql/planner/seeds.py) and a scalar subquery over the recursive reference in a term
with no FROM (recsql/planner/checks.py). The answers themselves are compared with Spark's own in
tests/compat/test_spark_cte_recursion.py (`*_seeded`, `one_row_subquery`)."""

from __future__ import annotations

import pytest
import sqlglot

from recsql.errors import RecSQLAnalysisError
from recsql.executor.endgame.driver_sql import Untranslatable, check_forms
from recsql.parser import parse_statement
from recsql.planner import DELTA, DictCatalog, plan_query
from recsql.planner.seeds import is_seeded, shift_seeds

CATALOG = DictCatalog({"edge": ["Src", "Dst"]})


def select(sql: str):
    return sqlglot.parse_one(sql, read="rasql")


def shifted(sql: str, iteration: int, args=None) -> str:
    return shift_seeds(select(sql), iteration, args).sql("rasql")


# ------------------------------------------------------------------------------ seeds

@pytest.mark.parametrize("call, at_iteration_3", [
    ("rand(7)", "RAND(9)"),
    ("random(7)", "RAND(9)"),
    ("randn(7)", "RANDN(9)"),
    ("uniform(1, 6, 7)", "UNIFORM(1, 6, 9)"),
    ("randstr(10, 7)", "RANDSTR(10, 9)"),
    ("uuid(7)", "UUID(9)"),
    ("shuffle(array(1, 2, 3), 7)", "SHUFFLE(ARRAY(1, 2, 3), 9)"),
])
def test_each_seeded_function_gets_seed_plus_the_steps_before(call, at_iteration_3):
    # Spark's UnionLoopExec: withShiftedSeed(currentLevel - 1), level 1 = the first recursive step
    assert shifted(f"SELECT {call} FROM r", 1) == f"SELECT {select(call).sql('rasql')} FROM r"
    assert shifted(f"SELECT {call} FROM r", 3) == f"SELECT {at_iteration_3} FROM r"


def test_first_recursive_step_and_unseeded_calls_are_left_as_written():
    term = select("SELECT rand(7) FROM r")
    assert shift_seeds(term, 1) is term and shift_seeds(term, 0) is term
    unseeded = select("SELECT rand(), uuid(), shuffle(array(1, 2)), n + 1 FROM r")
    assert not is_seeded(unseeded) and shift_seeds(unseeded, 5) is unseeded


def test_seeds_wrap_as_64_bit_longs_and_keep_their_sign():
    assert shifted("SELECT rand(-3) FROM r", 2) == "SELECT RAND(-2) FROM r"
    assert shifted("SELECT rand(2147483647) FROM r", 3) == "SELECT RAND(2147483649) FROM r"  # a BIGINT
    assert shifted("SELECT uuid(9223372036854775807) FROM r", 2) == \
        "SELECT UUID(-9223372036854775808) FROM r"
    assert shifted("SELECT rand(7L) FROM r", 2) == "SELECT RAND(8) FROM r"


def test_seeds_in_subqueries_and_filters_shift_too():
    # Spark shifts every seeded expression of the term, subqueries included
    assert shifted("SELECT n FROM r WHERE rand(1) < (SELECT max(rand(2)) FROM t)", 2) == \
        "SELECT n FROM r WHERE RAND(2) < (SELECT MAX(RAND(3)) FROM t)"


def test_parameter_and_expression_seeds():
    assert shifted("SELECT rand(:s) FROM r", 3, {"s": 11}) == "SELECT RAND(13) FROM r"
    # a foldable seed expression: Spark adds the shift as a BIGINT
    assert shifted("SELECT uniform(0, 10, 1 + 2) FROM r", 3) == \
        "SELECT UNIFORM(0, 10, CAST(1 + 2 AS BIGINT) + 2) FROM r"
    # NULL stays NULL shifted (and means "unseeded" to uuid/shuffle); uuid/shuffle take only a
    # literal, so anything else is left for Spark to refuse as it does at the first step
    assert shifted("SELECT rand(NULL), uuid(NULL), uuid(1 + 2) FROM r", 4) == \
        "SELECT RAND(NULL), UUID(NULL), UUID(1 + 2) FROM r"


def test_the_plan_marks_a_seeded_term_and_runs_it_shifted():
    # what the executor reads: `Branch.seeded`, decided by the planner, and `select_at`
    q = ("WITH RECURSIVE r(n, x) AS (SELECT 1, rand(7) UNION ALL SELECT n + 1, rand(:s) FROM r "
         "WHERE n < 3) SELECT * FROM r")
    (group,) = plan_query(parse_statement(q).expression, q, CATALOG).groups
    (anchor,), (term,) = group.ctes[0].base_branches, group.ctes[0].recursive_branches
    assert anchor.seeded and term.seeded
    assert anchor.select_at(3) is anchor.select  # the anchor is never shifted
    assert term.select_at(1, {"s": 11}) is term.select
    assert "RAND(13)" in term.select_at(3, {"s": 11}).sql("rasql")
    q = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + rand() FROM r WHERE n < 3) SELECT * FROM r"
    (group,) = plan_query(parse_statement(q).expression, q, CATALOG).groups
    assert not any(b.seeded for b in group.ctes[0].branches)


def test_the_driver_endgame_never_evaluates_a_random_function():
    # DuckDB cannot reproduce Spark's generators: these branches stay on Spark
    for call in ("rand(7)", "randn(7)", "uniform(1, 6, 7)", "randstr(10, 7)", "uuid(7)",
                 "shuffle(array(1, 2), 7)", "rand()", "uuid()"):
        with pytest.raises(Untranslatable):
            check_forms(select(f"SELECT {call} FROM r"), ())


def test_uuid_keeps_its_seed_through_the_parser():
    assert select("SELECT uuid(82374)").sql("rasql") == "SELECT UUID(82374)"
    assert select("SELECT uuid()").sql("rasql") == "SELECT UUID()"


# ------------------------------------------------------------------ one-row subquery terms

ONE_ROW = "WITH RECURSIVE t1(n) AS (SELECT 1 UNION ALL SELECT {term}) SELECT * FROM t1 LIMIT 5"


def plan(q: str):
    return plan_query(parse_statement(q).expression, q, CATALOG)


@pytest.mark.parametrize("term", [
    "(SELECT n + 1 FROM t1 WHERE n < 5)",
    "coalesce((SELECT x.n + 1 FROM t1 AS x WHERE x.n < 5), 0) AS m",
])
def test_scalar_subquery_over_the_reference_in_a_term_without_from(term):
    (group,) = plan(ONE_ROW.format(term=term)).groups
    (cte,) = group.ctes
    (branch,) = cte.recursive_branches
    # the reference in the subquery reads the previous step's rows, as Spark binds it
    assert len(branch.refs) == 1 and branch.variants == ((DELTA,),)


@pytest.mark.parametrize("query", [
    # Spark refuses a recursive reference under an aggregate or a sort
    ONE_ROW.format(term="(SELECT max(n) + 1 FROM t1 WHERE n < 5)"),
    ONE_ROW.format(term="(SELECT n + 1 FROM t1 WHERE n < 5 ORDER BY n)"),
    # not (yet) read as Spark reads them
    ONE_ROW.format(term="(SELECT a.n + 1 FROM t1 AS a JOIN t1 AS b ON a.n = b.n)"),
    ONE_ROW.format(term="2 WHERE EXISTS (SELECT 1 FROM t1 WHERE n < 2)"),
    ONE_ROW.format(term="n + (SELECT n FROM t1 WHERE n < 5) FROM t1"),
    # set recursion: a subquery over a relation still being built is not monotone
    "WITH RECURSIVE t1(n) AS (SELECT 1 UNION SELECT (SELECT n + 1 FROM t1 WHERE n < 5)) SELECT * FROM t1",
])
def test_other_subqueries_over_the_group_stay_refused(query):
    with pytest.raises(RecSQLAnalysisError) as info:
        plan(query)
    assert info.value.condition == "RECSQL_RECURSIVE_REFERENCE_IN_SUBQUERY"
