"""The per-iteration join-side vote (PARALAGG Algorithm 1): the vote itself, and each of its
three outcomes forced on real Spark with answers checked against networkx."""

from __future__ import annotations

import networkx as nx
import pytest

import recsql
from recsql.executor.strategies.joinside import (
    BROADCAST_BASE,
    BROADCAST_DELTA,
    SHUFFLE,
    decide,
    partition_vote,
    vote,
)

# This file tests the Spark loop's own machinery: every iteration runs on Spark.
pytestmark = pytest.mark.usefixtures("spark_loop")

EDGES = [(1, 2, 4), (2, 3, 1), (1, 3, 7), (3, 4, 2), (4, 1, 1), (4, 5, 3), (5, 6, 1), (2, 6, 9)]
SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""
TC = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge)
  UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src)
SELECT X, Y FROM tc"""


def test_partition_votes():
    assert partition_vote(1, 100, 4) == BROADCAST_DELTA
    assert partition_vote(100, 1, 4) == BROADCAST_BASE
    assert partition_vote(10, 12, 4) == SHUFFLE


def test_majority_decides_and_ties_shuffle():
    assert vote([0, 1, 0, 2], [100, 90, 120, 80]) == BROADCAST_DELTA
    assert vote([900, 800, 700, 1], [1, 2, 3, 100]) == BROADCAST_BASE
    assert vote([1, 1, 500, 500], [100, 100, 1, 1]) == SHUFFLE  # 2 of 4 is no majority
    assert vote([], []) == SHUFFLE


def test_broadcast_is_bounded_by_rows_and_forced_choices_win():
    assert decide([0, 1], [100, 100], delta_rows=1, base_rows=200, broadcast_rows=0) == SHUFFLE
    assert decide([900, 800], [1, 1], delta_rows=1700, base_rows=2, broadcast_rows=10) == BROADCAST_BASE
    assert decide(None, None, delta_rows=5, base_rows=None, broadcast_rows=10) == BROADCAST_DELTA
    assert decide([0], [9], 0, 9, 10, forced=SHUFFLE) == SHUFFLE


def _dijkstra():
    graph = nx.DiGraph()
    for s, d, c in EDGES:
        graph.add_edge(s, d, weight=c)
    return sorted(nx.single_source_dijkstra_path_length(graph, 1).items())


@pytest.mark.parametrize("forced, label", [
    (BROADCAST_DELTA, BROADCAST_DELTA), (BROADCAST_BASE, BROADCAST_BASE), (SHUFFLE, "co-partitioned"),
])
def test_each_outcome_forced_gives_the_oracle_answer(spark, view, forced, label):
    view("edge", EDGES, "Src INT, Dst INT, Cost INT")
    result = recsql.run(SSSP, spark=spark, conf={"spark.recsql.joinStrategy": forced})
    assert sorted(tuple(r) for r in result.df.collect()) == _dijkstra()
    recursive = [s for s in result.stats if s.iteration > 0 and s.delta_rows >= 0]
    assert {s.join_strategy for s in recursive if s.join_strategy != "-"} == {label}


def test_vote_decides_each_iteration_and_is_recorded(spark, view):
    view("edge", [(s, d) for s, d, _ in EDGES], "Src INT, Dst INT")
    result = recsql.run(TC, spark=spark)
    closure = nx.transitive_closure(nx.DiGraph([(s, d) for s, d, _ in EDGES]), reflexive=False)
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(closure.edges())
    chosen = {s.join_strategy for s in result.stats if s.iteration > 0}
    assert chosen <= {BROADCAST_DELTA, BROADCAST_BASE, SHUFFLE, "co-partitioned", "-"}
    assert chosen - {"-"}, "every iteration with a delta records its decision"


def test_iteration_time_is_split_into_driver_and_job(spark, view):
    view("edge", EDGES, "Src INT, Dst INT, Cost INT")
    result = recsql.run(SSSP, spark=spark)
    assert sorted(tuple(r) for r in result.df.collect()) == _dijkstra()
    ran = [s for s in result.stats if s.join_strategy != "-" or s.iteration == 0]
    assert all(s.job_seconds > 0 for s in ran), "every iteration that merged ran one Spark job"
    for s in result.stats:
        assert s.driver_seconds >= 0
        assert s.driver_seconds + s.job_seconds == pytest.approx(s.seconds, abs=1e-6)


def test_a_co_partitioned_join_with_a_base_too_large_to_broadcast_runs_in_place(spark, view):
    # No vote can move such a join, so its iterations do not measure the delta per partition;
    # each still runs in place, and the answer is Dijkstra's.
    view("edge", EDGES, "Src INT, Dst INT, Cost INT")
    result = recsql.run(SSSP, spark=spark, conf={"spark.recsql.broadcastRows": "0"})
    assert sorted(tuple(r) for r in result.df.collect()) == _dijkstra()
    assert {s.join_strategy for s in result.stats if s.iteration > 0} == {"co-partitioned"}
