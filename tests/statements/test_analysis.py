"""The analysis stage (`statements.stages.analyse`, `executor.analysis`): a typed, immutable plan
made by Spark analyses alone. EXPLAIN and CREATE VIEW stop there and run no Spark job; the jobs
are counted by Spark's status tracker under a job group of the test's own (classic sessions)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import FrozenInstanceError

import oracles
import pytest
from conftest import rows, unique_name

import recsql
from recsql.parser import parse_statement
from recsql.settings import Settings
from recsql.statements import stages
from recsql.statements.request import Request

EDGE = [(1, 2, 3), (2, 3, 4), (1, 3, 9), (3, 4, 1), (4, 2, 1), (5, 6, 1)]
SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""
# an earlier stratum (a plain CTE and a non-recursive group) before the recursive group
STRATA = """WITH RECURSIVE light AS (SELECT Src, Dst, Cost FROM edge WHERE Cost < 9),
  path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT light.Dst, path.Cost + light.Cost FROM path, light WHERE path.Dst = light.Src)
SELECT Dst, Cost FROM path"""


@pytest.fixture
def edge(view):
    return view("edge", EDGE, "Src int, Dst int, Cost int")


@contextmanager
def counted_jobs(spark):
    """The ids of the Spark jobs run inside the block (a job group of its own)."""
    group = unique_name("analysis_jobs")
    jobs: list[int] = []
    spark.sparkContext.setJobGroup(group, "recsql analysis test")
    try:
        yield jobs
    finally:
        jobs += spark.sparkContext.statusTracker().getJobIdsForGroup(group)
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def request(spark, text: str) -> Request:
    statement = parse_statement(text)
    settings = Settings.read(spark)
    return Request(spark=spark, settings=settings, statement=statement, args=None, frames={},
                   passthrough=lambda: spark.sql(text))


def analysed(spark, text: str):
    req = request(spark, text)
    return stages.analyse(req, stages.plan(req, stages.bind(req, req.statement.expression)))


def test_counting_sees_the_jobs_a_query_runs(spark, edge):
    """The counter can fail: running the same query runs jobs, and answers Dijkstra's costs."""
    with counted_jobs(spark) as jobs:
        got = rows(recsql.sql(SSSP, spark=spark))
    assert got == sorted(oracles.dijkstra(EDGE, 1).items())
    assert jobs


@pytest.mark.parametrize("query", [SSSP, STRATA], ids=["one-group", "strata"])
def test_explain_runs_no_spark_job(spark, edge, query):
    """The statement runs none; reading its one-row answer afterwards is a job of its own on a
    classic session (a DataFrame made from a local list is scanned by a job)."""
    with counted_jobs(spark) as jobs:
        result = recsql.run("EXPLAIN " + query, spark=spark)
    assert jobs == []
    text = "\n".join(row[0] for row in result.df.collect())
    assert "== Spark physical plan of one iteration of path ==" in text
    assert "== Physical Plan ==" in text


def test_create_view_runs_no_spark_job_and_has_the_analysed_types(spark, edge):
    name = unique_name("analysed_view")
    try:
        with counted_jobs(spark) as jobs:
            recsql.sql(f"CREATE TEMPORARY VIEW {name} AS {STRATA}", spark=spark)
        assert jobs == []
        schema = spark.table(name).schema
        assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == \
            [("Dst", "int"), ("Cost", "int")]  # `SELECT 1, 0`, then INT + INT
        expected = {d: c for d, c in oracles.dijkstra([e for e in EDGE if e[2] < 9], 1).items()}
        assert rows(recsql.sql(f"SELECT * FROM {name}", spark=spark)) == sorted(expected.items())
    finally:
        spark.catalog.dropTempView(name)


def test_the_analysed_plan_is_typed_as_spark_types_the_union(spark, edge):
    """An (INT, DECIMAL) anchor widened by a (BIGINT, DOUBLE) recursive term. The oracle is
    Spark's own UNION widening of the recursion unrolled twice (Spark's recursive CTE refuses a
    term that widens its anchor)."""
    anchor = "SELECT 1 AS n, CAST(1 AS DECIMAL(5, 2)) AS w"
    term = "SELECT n + CAST(1 AS BIGINT), w + CAST(1 AS DOUBLE) FROM ({}) WHERE n < 4"
    query = f"WITH RECURSIVE r (n, w) AS ({anchor} UNION ALL {term.format('r')}) SELECT n, w FROM r"
    query = query.replace("FROM (r)", "FROM r")
    unrolled = f"{anchor} UNION ALL " + term.format(f"{anchor} UNION ALL " + term.format(anchor))
    plan = analysed(spark, query)
    (schema,) = plan.schemas.values()
    assert [f.dataType for f in schema.fields] == [f.dataType for f in spark.sql(unrolled).schema.fields]
    with pytest.raises(TypeError):
        plan.schemas["r"] = schema  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        plan.plan = None  # type: ignore[misc]


def test_a_type_error_is_found_by_analysis_at_its_place_with_no_job(spark, edge):
    query = """WITH recursive r (a) AS (SELECT map(1, 2)) UNION (SELECT 'x' FROM r)
SELECT a FROM r"""
    with counted_jobs(spark) as jobs, pytest.raises(recsql.RecSQLError) as info:
        recsql.explain(query, spark=spark)
    assert jobs == []
    error = info.value
    assert error.condition == "RECSQL_HEAD_BRANCH_TYPE_MISMATCH"
    # under the branch's 'x' in `EXPLAIN WITH ...` (the place the error had when the loop found it)
    assert (error.line, error.pos) == (1, 65)
    assert error.sql.splitlines()[0][65:68] == "'x'"
