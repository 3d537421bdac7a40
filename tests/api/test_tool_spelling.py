"""The spelling of recursive aggregates that tools parse, end to end on Spark.

Under UNION, `SELECT k, MIN(v) ... GROUP BY k` in a recursive term is RaSQL's head aggregate:
checked against networkx and plain-Python fixpoints, in both spellings. Under UNION ALL each
step aggregates the previous step's rows: checked against DuckDB running the same text. Spark
itself refuses an aggregate in a recursive term, so no query it answers changes meaning."""

from __future__ import annotations

import random
from collections import defaultdict

import duckdb
import networkx as nx
import pytest
from conftest import rows
from pyspark.errors import AnalysisException

import recsql
from recsql import RecSQLAnalysisError
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs

N = 40


def _graph(seed: int, acyclic: bool) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    edges = set()
    while len(edges) < 110:
        a, b = rng.randrange(1, N + 1), rng.randrange(1, N + 1)
        if a != b and (not acyclic or a < b):
            edges.add((a, b))
    return sorted((a, b, rng.randint(1, 9)) for a, b in edges)


GRAPH = _graph(7, acyclic=False)
DAG = _graph(11, acyclic=True)


@pytest.fixture(scope="module")
def graphs(spark):
    for name, data in (("edges", GRAPH), ("dag", DAG)):
        spark.createDataFrame(data, "src INT, dst INT, cost INT").createOrReplaceTempView(name)
    yield
    for name in ("edges", "dag"):
        spark.catalog.dropTempView(name)


def _sql(spark, q):
    return rows(recsql.sql(q, spark=spark))


# -------------------------------------------------------------------- UNION: the head aggregate

SSSP_TOOLS = """WITH RECURSIVE path (dst, cost) AS (
  SELECT 1, 0
  UNION
  SELECT e.dst, MIN(p.cost + e.cost) FROM path p JOIN edges e ON p.dst = e.src GROUP BY e.dst)
SELECT dst, cost FROM path"""
SSSP_RASQL = """WITH RECURSIVE path (dst, min() AS cost) AS (
  SELECT 1, 0
  UNION
  SELECT e.dst, p.cost + e.cost FROM path p JOIN edges e ON p.dst = e.src)
SELECT dst, cost FROM path"""


def test_min_matches_dijkstra_in_both_spellings(spark, graphs):
    g = nx.DiGraph()
    g.add_weighted_edges_from(GRAPH)
    expected = sorted(nx.single_source_dijkstra_path_length(g, 1).items())
    assert _sql(spark, SSSP_TOOLS) == expected
    assert _sql(spark, SSSP_RASQL) == expected


def test_max_two_terms_longest_path_in_a_dag(spark, graphs):
    # two recursive terms, each MAX over the same column: an edge gains its cost, or 1 when the
    # second term takes it (costly edges only)
    q = """WITH RECURSIVE far (node, len) AS (
      SELECT 1, 0
      UNION SELECT d.dst, MAX(f.len + d.cost) FROM far f JOIN dag d ON f.node = d.src GROUP BY d.dst
      UNION SELECT d.dst, MAX(f.len + 1) FROM far f JOIN dag d ON f.node = d.src WHERE d.cost > 5 GROUP BY d.dst)
    SELECT node, len FROM far"""
    best = {1: 0}
    for a, b, c in sorted(DAG):  # a < b on every edge: sorted by source is a topological order
        if a in best:
            best[b] = max(best.get(b, 0), best[a] + c, best[a] + 1 if c > 5 else 0)
    assert _sql(spark, q) == sorted(best.items())


def test_sum_counts_paths_in_a_dag(spark, graphs):
    q = """WITH RECURSIVE paths (node, n) AS (
      SELECT 1, 1
      UNION
      SELECT d.dst, SUM(p.n) FROM paths p JOIN dag d ON p.node = d.src GROUP BY d.dst)
    SELECT node, n FROM paths"""
    count = defaultdict(int, {1: 1})
    for node in sorted({x for e in DAG for x in e[:2]}):  # a < b on every edge: a topological order
        for a, b, _ in DAG:
            if a == node:
                count[b] += count[a]
    assert _sql(spark, q) == sorted((k, v) for k, v in count.items() if v)


def test_count_star_counts_the_reached_predecessors(spark, graphs):
    # COUNT(*) is count() with each contributor (a reached predecessor) counting 1; the anchor's
    # own row counts too (docs/dialect.md section 1)
    q = """WITH RECURSIVE reached (node, n) AS (
      SELECT 1, 1
      UNION
      SELECT e.dst, COUNT(*) FROM reached r JOIN edges e ON r.node = e.src GROUP BY e.dst)
    SELECT node, n FROM reached"""
    reach = nx.descendants(nx.DiGraph([e[:2] for e in GRAPH]), 1) | {1}
    expected = {node: len({a for a, b, _ in GRAPH if b == node and a in reach}) + (node == 1)
                for node in reach}
    assert _sql(spark, q) == sorted(expected.items())


def test_an_error_renders_with_line_and_caret(spark, graphs):
    q = SSSP_TOOLS.replace("MIN(p.cost + e.cost)", "AVG(p.cost + e.cost)")
    with pytest.raises(RecSQLAnalysisError) as info:
        recsql.sql(q, spark=spark)
    err = info.value
    assert err.condition == "RECSQL_UNSUPPORTED_HEAD_AGGREGATE" and err.line == 4
    assert "== SQL ==" in str(err) and "MIN, MAX, SUM or COUNT" in str(err)


@pytest.mark.parametrize("union,condition", [("UNION", "UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE"),
                                             ("UNION ALL", "INVALID_RECURSIVE_REFERENCE.PLACE")])
def test_spark_refuses_an_aggregate_in_a_recursive_term(spark, graphs, union, condition):
    # so reading it as the head aggregate changes the meaning of no query Spark answers
    q = SSSP_TOOLS.replace("UNION", union).replace("edges", "dag")
    with quiet_pyspark_error_logs(), pytest.raises(AnalysisException) as info:
        spark.sql(q).collect()
    assert info.value.getCondition() == condition


# ---------------------------------------------------------------- UNION ALL: per step, as DuckDB

PER_STEP = {
    "min": """WITH RECURSIVE path (dst, cost) AS (
      SELECT 1, 0
      UNION ALL
      SELECT e.dst, MIN(p.cost + e.cost) FROM path p JOIN dag e ON p.dst = e.src GROUP BY e.dst)
    SELECT dst, cost FROM path""",
    "count_and_depth": """WITH RECURSIVE walk (node, depth, n) AS (
      SELECT src, 0, COUNT(*) FROM dag GROUP BY src
      UNION ALL
      SELECT d.dst, w.depth + 1, COUNT(*) FROM walk w JOIN dag d ON w.node = d.src GROUP BY d.dst, w.depth + 1)
    SELECT node, depth, n FROM walk""",
    "sum_global": """WITH RECURSIVE level (k, total) AS (
      SELECT 0, CAST(1 AS BIGINT)
      UNION ALL
      SELECT k + 1, SUM(total) FROM level WHERE k < 6 GROUP BY k + 1)
    SELECT k, total FROM level""",
}


@pytest.mark.parametrize("q", PER_STEP.values(), ids=PER_STEP)
def test_union_all_aggregates_each_step_as_duckdb(spark, graphs, q):
    con = duckdb.connect()
    con.execute("CREATE TABLE dag (src INTEGER, dst INTEGER, cost INTEGER)")
    con.executemany("INSERT INTO dag VALUES (?, ?, ?)", DAG)
    expected = sorted(tuple(r) for r in con.sql(q).fetchall())
    got = _sql(spark, q)
    assert len(got) > 1 and got == expected
