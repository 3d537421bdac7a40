"""A final query of one SELECT over a bound DataFrame runs as DataFrame calls (`selectExpr`,
`where`, ...) instead of `spark.sql` with the DataFrame bound by name. The oracle is Spark's own
evaluation of the same text (`run_sql`): the same columns (names, types, nullability) and rows."""

from __future__ import annotations

import pytest
from conftest import rows

import recsql
from recsql.executor.loop.spark_sql import as_dataframe_calls, render, run_sql
from recsql.parser import parse_statement

BOUND = [(1, 10, "a"), (2, None, "b"), (3, 30, None), (4, 10, "{d}")]


@pytest.fixture
def bound(spark):
    return {"rq_b": spark.createDataFrame(BOUND, "X bigint, Y int, Name string")}


def query(text: str):
    return parse_statement(text).expression


@pytest.mark.parametrize("text", [
    # the warm filtered closure view's final query
    "SELECT node FROM (SELECT X AS node, Y AS reached FROM {rq_b} AS tc) AS closure(node, reached) "
    "WHERE reached = 10",
    "SELECT tc.X, tc.Y + 1 AS y1, upper(Name) AS u FROM {rq_b} AS tc WHERE tc.X > 1",
    # a rename whose case differs from the column read, and a name list that renames nothing
    "SELECT * FROM (SELECT X, y FROM {rq_b} AS t) AS v(a, B) WHERE B IS NOT NULL",
    "SELECT v.a FROM (SELECT X AS a, Y AS b FROM {rq_b}) AS v(a, b) WHERE v.b = 10",
    "SELECT t.* FROM {rq_b} AS t WHERE t.Name <> '{d}' OR t.Name IS NULL",
    "SELECT named_struct('k', X).k AS f, coalesce(Y, 0) AS c, CAST(X AS string) AS s, "
    "'{x}' AS braces FROM {rq_b} AS t",
    "SELECT x, NAME FROM {rq_b}",
])
def test_the_calls_give_what_spark_sql_gives(spark, bound, text):
    node = query(text)
    expected = run_sql(spark, render(node, escape_braces=True), bound, None, text, node)
    got = as_dataframe_calls(node, bound)
    assert got is not None
    assert got.schema == expected.schema
    assert rows(got) == rows(expected)


@pytest.mark.parametrize("text", [
    "SELECT count(*) AS n FROM {rq_b}",
    "SELECT X, row_number() OVER (ORDER BY X) AS r FROM {rq_b}",
    "SELECT DISTINCT Y FROM {rq_b}",
    "SELECT X FROM {rq_b} ORDER BY X",
    "SELECT X FROM {rq_b} LIMIT 2",
    "SELECT Y FROM {rq_b} GROUP BY Y",
    "SELECT a.X FROM {rq_b} AS a JOIN {rq_b} AS b ON a.X = b.Y",
    "SELECT X FROM {rq_b} WHERE X IN (SELECT Y FROM {rq_b})",
    "SELECT X FROM {rq_b} WHERE X = :x",
    "SELECT X + 1 FROM {rq_b}",  # an unaliased expression: Spark names it from the whole query
    "SELECT explode(array(X, Y)) AS e FROM {rq_b}",
    "WITH w AS (SELECT X FROM {rq_b}) SELECT X FROM w",
    "SELECT X FROM {rq_b} UNION SELECT Y FROM {rq_b}",
    "SELECT 1 AS one",
    # Spark names an unnamed derived table itself, which hides `tc` from the outer query
    "SELECT tc.X FROM (SELECT tc.X FROM {rq_b} AS tc)",
])
def test_other_queries_are_left_to_spark_sql(bound, text):
    assert as_dataframe_calls(query(text), bound) is None


def test_what_spark_refuses_is_left_to_spark_sql(bound):
    """The text then reports the error, located in the user's query."""
    assert as_dataframe_calls(query("SELECT nope FROM {rq_b}"), bound) is None
    assert as_dataframe_calls(query("SELECT X FROM {rq_b} AS t WHERE u.X = 1"), bound) is None
    assert as_dataframe_calls(query("SELECT a FROM (SELECT X, Y FROM {rq_b}) AS v(a)"), bound) is None


def test_an_unknown_column_of_a_recursive_view_is_reported_where_it_is_written(spark):
    spark.createDataFrame([(1, 2), (2, 3)], "Src bigint, Dst bigint").createOrReplaceTempView("calls_edge")
    recsql.run("CREATE OR REPLACE TEMPORARY VIEW calls_tc AS WITH recursive tc (X, Y) AS "
               "(SELECT Src, Dst FROM calls_edge) UNION (SELECT tc.X, calls_edge.Dst FROM tc, calls_edge "
               "WHERE tc.Y = calls_edge.Src) SELECT X AS node, Y AS reached FROM tc", spark=spark)
    answer = recsql.run("SELECT node FROM calls_tc WHERE reached = 3", spark=spark).df
    assert rows(answer) == [(1,), (2,)]
    assert rows(answer.select("calls_tc.node")) == [(1,), (2,)]  # qualified by the view's name
    with pytest.raises(recsql.RecSQLError) as failure:
        recsql.run("SELECT node FROM calls_tc WHERE reachd = 3", spark=spark)
    assert "UNRESOLVED_COLUMN" in str(failure.value) and failure.value.pos == 32
