"""A recursive branch's loop-invariant scalar subqueries, evaluated once before the group's loop
and run as constants of the subquery's exact type (issue 38: planner/invariants.py,
executor/loop/invariants.py). The oracle is Spark's own evaluation of the same query (its WITH
RECURSIVE), or networkx; every query runs on the default path (the driver endgame may take a
branch once its subquery is a constant) and on the Spark loop. Whether recsql evaluated a
subquery once, or left it in its branch, is read from its log."""

from __future__ import annotations

import logging
from collections import Counter

import networkx as nx
import pytest
from conftest import setting

import recsql
from recsql.errors import RecSQLError

PATHS = {"default": {}, "spark_loop": {"spark.recsql.endgame.enabled": "false"}}
LOGGER = "recsql.executor.loop.invariants"
HOISTED, LEFT = "evaluates a subquery once", "stays in its branch"

VALUES = ("CREATE OR REPLACE TEMPORARY VIEW inv_vals AS SELECT * FROM VALUES "
          "(1, CAST(1.10 AS DECIMAL(10, 2)), 0.1D, 'it''s a \\\\ {brace}', DATE'2024-02-29', "
          "TIMESTAMP'2024-11-03 06:30:00 UTC', TIMESTAMP_NTZ'0001-01-01 00:00:00.000001', "
          "CAST(0.1 AS FLOAT), -7Y, true), "
          "(2147483647, 2.25BD, 1e300D, 'é\\nz', DATE'0999-12-31', "
          "TIMESTAMP'1969-12-31 23:59:59.999999 UTC', TIMESTAMP_NTZ'9999-12-31 23:59:59.999999', "
          "CAST(-2.5 AS FLOAT), 5Y, false), "
          "(-3, -3.33BD, -0.0D, '', DATE'2024-01-01', "
          "TIMESTAMP'2024-11-03 05:30:00 UTC', TIMESTAMP_NTZ'2024-01-01 00:00:00', "
          "CAST(3 AS FLOAT), 0Y, false) "
          "AS t(i, d, x, s, dt, ts, ntz, f, y, z)")
EDGES = [(1, 2, 7), (1, 3, 9), (1, 6, 14), (2, 3, 10), (2, 4, 15), (3, 4, 11), (3, 6, 2),
         (4, 5, 6), (5, 6, 9), (6, 5, 9), (6, 1, 3), (7, 8, 1), (5, 7, 20), (6, 7, 4)]


@pytest.fixture(scope="module", autouse=True)
def tables(spark):
    spark.sql(VALUES)
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost BIGINT").createOrReplaceTempView("inv_edge")
    yield
    for name in ("inv_vals", "inv_edge"):
        spark.catalog.dropTempView(name)


def bag(df) -> Counter:
    return Counter(tuple(row) for row in df.collect())


def run(spark, caplog, query: str, conf: dict):
    """recsql's result of `query` and its log of the subqueries it evaluated once or left."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        result = recsql.run(query, spark=spark, conf=conf)
        answer = bag(result.df)
    return result, answer, [r.getMessage() for r in caplog.records if r.name == LOGGER]


# Spark's types of a subquery, and of its value as written out: each spelled back exactly
SUBQUERIES = {
    "int": "SELECT max(i) FROM inv_vals",
    "bigint": "SELECT sum(i) FROM inv_vals",
    "decimal": "SELECT avg(d) FROM inv_vals",  # DECIMAL(14, 6), its value rounded to 6 places
    "double": "SELECT sum(x) FROM inv_vals WHERE i > 1",
    "double_tiny": "SELECT min(x) / 1e300D FROM inv_vals WHERE i = 1",
    "string": "SELECT max(s) FROM inv_vals",
    "string_braces": "SELECT min(s) FROM inv_vals WHERE i = 1",
    "date": "SELECT min(dt) FROM inv_vals",
    "timestamp": "SELECT max(ts) FROM inv_vals",
    "timestamp_before_1970": "SELECT min(ts) FROM inv_vals",
    "timestamp_ntz": "SELECT max(ntz) FROM inv_vals",
    "timestamp_ntz_year_1": "SELECT min(ntz) FROM inv_vals",
    "float": "SELECT min(f) FROM inv_vals",
    "tinyint": "SELECT min(y) FROM inv_vals",
    "boolean": "SELECT bool_or(z) FROM inv_vals",
    "no_row": "SELECT d FROM inv_vals WHERE i > 2147483647",
    "no_row_string": "SELECT s FROM inv_vals WHERE i > 2147483647",
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", SUBQUERIES)
def test_a_subquery_is_evaluated_once_as_spark_types_it(spark, caplog, name, path):
    sub = f"({SUBQUERIES[name]})"
    # its type and its value as Spark writes them out (a TIMESTAMP's as its instant: the hour a
    # clock turned back writes out twice)
    written = f"CAST(unix_micros({sub}) AS STRING)" if "timestamp" in name and "ntz" not in name \
        else f"CAST({sub} AS STRING)"
    query = (f"WITH RECURSIVE r(lvl, t, v) AS (SELECT 0, '', '' UNION ALL SELECT lvl + 1, typeof({sub}), "
             f"{written} FROM r WHERE lvl < 2) SELECT * FROM r")
    # a session time zone whose clocks turn back, on the night of the TIMESTAMP values
    with setting(spark, "spark.sql.session.timeZone", "America/New_York"):
        expected = bag(spark.sql(query))
        _, answer, log = run(spark, caplog, query, PATHS[path])
    assert answer == expected
    assert sum(HOISTED in m for m in log) == 1, log  # the same subquery twice: evaluated once


# The driver's constants: a branch whose subquery became one runs on the driver, with the value
# and type Spark's branch has
ON_DRIVER = {"int": "max(i)", "bigint": "sum(i)", "decimal": "avg(d)", "double": "sum(x)", "string": "max(s)",
             "date": "min(dt)", "boolean": "bool_or(z)", "float": "min(f)", "tinyint": "min(y)"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ON_DRIVER)
def test_a_branch_with_a_constant_for_its_subquery_reaches_the_driver(spark, caplog, name, path):
    aggregate = ON_DRIVER[name]
    sub = f"(SELECT {aggregate} FROM inv_vals)"
    # compared with each row's own value (the aggregate over that row alone: Spark's recursion
    # wants the anchor's types), and passed on
    query = (f"WITH RECURSIVE r(lvl, v, same) AS (SELECT 0, {aggregate}, false FROM inv_vals GROUP BY i "
             f"UNION ALL SELECT lvl + 1, {sub}, v = {sub} FROM r WHERE lvl < 2) SELECT * FROM r")
    expected = bag(spark.sql(query))
    result, answer, log = run(spark, caplog, query, PATHS[path])
    assert answer == expected
    assert any(HOISTED in m for m in log), log
    assert ("driver" in {s.ran_on for s in result.stats}) == (path == "default")


@pytest.mark.parametrize("path", PATHS)
def test_no_row_is_the_null_of_its_type(spark, caplog, path):
    sub = "(SELECT d FROM inv_vals WHERE i > 2147483647)"
    query = (f"WITH RECURSIVE r(lvl, v, missing) AS (SELECT 0, {sub}, false UNION ALL "
             f"SELECT lvl + 1, {sub}, {sub} IS NULL FROM r WHERE lvl < 2) SELECT * FROM r")
    expected = bag(spark.sql(query))
    result, answer, log = run(spark, caplog, query, PATHS[path])
    assert answer == expected == Counter([(0, None, False), (1, None, True), (2, None, True)])
    assert ("driver" in {s.ran_on for s in result.stats}) == (path == "default")
    assert any(HOISTED in m and "CAST(NULL AS DECIMAL(10, 2))" in m for m in log), log


SSSP_BELOW_AVERAGE = ("WITH RECURSIVE path(Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
                      "(SELECT e.Dst, p.Cost + e.Cost FROM path AS p JOIN inv_edge AS e ON p.Dst = e.Src "
                      "WHERE e.Cost < (SELECT avg(Cost) FROM inv_edge)) SELECT Dst, Cost FROM path")


@pytest.mark.parametrize("path", PATHS)
def test_shortest_paths_over_the_edges_cheaper_than_the_average(spark, caplog, path):
    average = sum(c for _, _, c in EDGES) / len(EDGES)
    g = nx.DiGraph()
    g.add_weighted_edges_from([e for e in EDGES if e[2] < average])
    expected = Counter(nx.single_source_dijkstra_path_length(g, 1).items())
    result, answer, log = run(spark, caplog, SSSP_BELOW_AVERAGE, PATHS[path])
    assert answer == expected
    assert any(HOISTED in m for m in log), log
    where = {s.ran_on for s in result.stats}
    assert where == ({"driver"} if path == "default" else {"spark"})


@pytest.mark.parametrize("path", PATHS)
def test_a_subquery_reading_an_earlier_recursive_cte(spark, caplog, path):
    query = ("WITH RECURSIVE a(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM a WHERE n < 5), "
             "r(lvl, m) AS (SELECT 0, 0L UNION ALL SELECT lvl + 1, m + (SELECT sum(n) FROM a) FROM r "
             "WHERE lvl < 4) SELECT * FROM r")
    expected = bag(spark.sql(query))
    result, answer, log = run(spark, caplog, query, PATHS[path])
    assert answer == expected == Counter({(k, 15 * k): 1 for k in range(5)})
    assert any(HOISTED in m and "= CAST(15 AS BIGINT)" in m for m in log), log
    r_places = {s.ran_on for s in result.stats if s.cte == "r" and s.iteration > 0}
    assert r_places == ({"driver"} if path == "default" else {"spark"})


@pytest.mark.parametrize("path", PATHS)
def test_more_than_one_row_is_sparks_error_as_before(spark, caplog, path):
    query = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + (SELECT i FROM inv_vals WHERE i > 0) "
             "FROM r WHERE n < 3) SELECT * FROM r")
    with pytest.raises(Exception, match="SCALAR_SUBQUERY_TOO_MANY_ROWS"):  # noqa: B017 - Spark's own
        spark.sql(query).collect()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER), pytest.raises(RecSQLError) as error:
        recsql.sql(query, spark=spark, conf=PATHS[path]).collect()
    assert error.value.condition == "SCALAR_SUBQUERY_TOO_MANY_ROWS"
    assert "`r` failed at iteration 1" in str(error.value)
    assert not any(HOISTED in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("path", PATHS)
def test_a_correlated_subquery_stays_in_its_branch(spark, caplog, path):
    # `lvl` is the recursive reference's column: only Spark's analysis of the subquery alone,
    # where it does not resolve, tells it from a column of inv_vals
    query = ("WITH RECURSIVE r(lvl, m) AS (SELECT 0, 0 UNION ALL SELECT lvl + 1, "
             "(SELECT count(*) FROM inv_vals WHERE i > lvl) FROM r WHERE lvl < 3) SELECT * FROM r")
    result, answer, log = run(spark, caplog, query, PATHS[path])
    i = [1, 2147483647, -3]
    assert answer == Counter([(0, 0), *((lvl + 1, sum(v > lvl for v in i)) for lvl in range(3))])
    assert any(LEFT in m for m in log) and not any(HOISTED in m for m in log), log
    assert {s.ran_on for s in result.stats} == {"spark"}


@pytest.mark.parametrize("path", PATHS)
def test_a_seeded_random_subquery_is_drawn_again_at_every_step(spark, caplog, path):
    # Spark shifts the seed at every step, subqueries included: each step another value
    query = ("WITH RECURSIVE r(lvl, v) AS (SELECT 0, 0D UNION ALL SELECT lvl + 1, "
             "(SELECT max(x) * 0 + rand(7) FROM inv_vals WHERE i = 1) FROM r WHERE lvl < 3) SELECT * FROM r")
    expected = bag(spark.sql(query))
    _, answer, log = run(spark, caplog, query, PATHS[path])
    assert answer == expected and len({v for _, v in expected}) == 4
    assert log == []
