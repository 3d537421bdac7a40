"""Iteration roll-over (spark.recsql.rollover.maxRows): with a budget small enough to cut most
iterations into slices, every state kind still reaches the answer of an independent oracle, and
the transitive closure is also compared with the same query without roll-over."""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

import networkx as nx
import oracles
import pytest
from conftest import rows

import recsql

# This file tests the Spark loop's own machinery: every iteration runs on Spark.
pytestmark = pytest.mark.usefixtures("spark_loop")

OFF = {"spark.recsql.rollover.maxRows": 0}


def tiny(budget: int) -> dict:
    return {"spark.recsql.rollover.maxRows": budget}


def bowtie(width: int, length: int) -> list[tuple[int, int]]:
    """1 -> `width` vertices -> chain of `length` -> `width` vertices (benchmarks/graphs.py)."""
    left = list(range(2, 2 + width))
    chain = list(range(2 + width, 2 + width + length))
    right = list(range(chain[-1] + 1, chain[-1] + 1 + width))
    return ([(1, v) for v in left] + [(v, chain[0]) for v in left] + list(pairwise(chain))
            + [(chain[-1], v) for v in right])


def run_both(spark, query: str, budget: int):
    """(rows, stats) without roll-over, then with `budget`."""
    off = recsql.run(query, spark=spark, conf=OFF)
    return (rows(off.df), off.stats), run_rolled(spark, query, budget)


def run_rolled(spark, query: str, budget: int):
    """(rows, stats) with `budget` (the path without roll-over is every other test's)."""
    on = recsql.run(query, spark=spark, conf=tiny(budget))
    return rows(on.df), on.stats


def sliced(stats) -> int:
    return sum(1 for s in stats if s.slices > 1)


def test_bowtie_reachability(spark, view):
    edges = bowtie(12, 2)
    view("edge", edges, "Src bigint, Dst bigint")
    query = ("WITH recursive reach (X) AS (SELECT 1) UNION (SELECT edge.Dst FROM reach, edge "
             "WHERE reach.X = edge.Src) SELECT X FROM reach")
    on, stats = run_rolled(spark, query, 3)
    expected = sorted((v,) for v in nx.descendants(nx.DiGraph(edges), 1) | {1})
    assert on == expected
    # Only the 12-row left fan is sliced: the one-row deltas {1} and {chain end} fan out to 12
    # rows each, and a single delta row cannot be cut (that is spatial skew, not roll-over).
    assert [s.slices for s in stats if s.slices > 1] == [4]


def test_transitive_closure_on_a_bowtie_slices_the_explosion(spark, view):
    """The paper's case: the last iteration pairs every left vertex with every right one."""
    edges = bowtie(12, 3)
    view("edge", edges, "Src bigint, Dst bigint")
    query = ("WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION (SELECT tc.A, edge.Dst "
             "FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc")
    (off, off_stats), (on, stats) = run_both(spark, query, 40)
    assert off == on == sorted(oracles.transitive_closure(edges))
    explosion = 12 * 12 + 1  # left x right, and 1 -> the chain end
    rolled = max(stats, key=lambda s: s.slices)
    assert rolled.slices == 4  # ceil(145 / 40)
    assert max(s.output_rows for s in stats) < explosion
    assert all(s.slices == 1 for s in off_stats)
    assert all(s.output_rows is None for s in off_stats)  # roll-over off watches nothing


def test_sssp_min_state(spark, view):
    rng = random.Random(5)
    edges = {(rng.randrange(20), rng.randrange(20)): rng.randint(1, 20) for _ in range(60)}
    weighted = [(s, d, c) for (s, d), c in edges.items() if s != d]
    view("wedge", weighted, "Src int, Dst int, Cost int")
    query = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0) UNION (SELECT wedge.Dst, "
             "path.Cost + wedge.Cost FROM path, wedge WHERE path.Dst = wedge.Src) "
             "SELECT Dst, Cost FROM path")
    on, stats = run_rolled(spark, query, 10)
    assert on == sorted(oracles.dijkstra(weighted, 0).items())
    assert sliced(stats) >= 2


def test_count_paths_sum_state_on_a_dag(spark, view):
    rng = random.Random(7)
    dag = sorted({(a, b) for a, b in ((rng.randrange(30), rng.randrange(30)) for _ in range(90))
                  if a < b} | {(0, 1), (0, 2)})
    view("dag", dag, "Src int, Dst int")
    query = ("WITH recursive cpaths (Dst, count() AS Cnt) AS (SELECT 0, 1) UNION (SELECT dag.Dst, "
             "cpaths.Cnt FROM cpaths, dag WHERE cpaths.Dst = dag.Src) SELECT Dst, Cnt FROM cpaths")
    on, stats = run_rolled(spark, query, 6)
    assert on == sorted(oracles.count_paths_dag(dag, 0).items())
    assert sliced(stats) >= 2


def test_connected_components(spark, view):
    rng = random.Random(11)
    pairs = {(rng.randrange(50), rng.randrange(50)) for _ in range(45)}
    undirected = sorted({(a, b) for a, b in pairs if a != b} | {(b, a) for a, b in pairs if a != b})
    view("uedge", undirected, "Src int, Dst int")
    query = ("WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM uedge) UNION (SELECT "
             "uedge.Dst, cc.C FROM cc, uedge WHERE cc.X = uedge.Src) SELECT X, C FROM cc")
    on, stats = run_rolled(spark, query, 15)
    assert on == sorted(oracles.min_label_components(undirected))
    assert sliced(stats) >= 1


def test_union_all_bag_state(spark, view):
    """Every walk from 1 is a row: the bag counts paths, slices must not lose or repeat any."""
    dag = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (4, 6), (5, 7), (6, 7), (1, 7), (2, 5)]
    view("bagedge", dag, "Src int, Dst int")
    query = ("WITH RECURSIVE walk (N) AS (SELECT 1 UNION ALL SELECT bagedge.Dst FROM walk "
             "JOIN bagedge ON walk.N = bagedge.Src) SELECT N FROM walk")
    on, stats = run_rolled(spark, query, 1)
    expected = sorted(Counter(oracles.count_paths_dag(dag, 1)).elements())
    assert on == [(n,) for n in expected]
    assert sliced(stats) >= 2


@pytest.mark.parametrize("value", ["-1", "many"])
def test_budget_must_be_a_non_negative_integer(spark, value):
    with pytest.raises(recsql.RecSQLError, match="rollover.maxRows"):
        recsql.sql("SELECT 1", spark=spark, conf=tiny(value))
