"""Spatial balance (recsql/executor/strategies/skew.py): heavy join keys split over partitions give the same
answers as the unbalanced join, checked against independent oracles, and are actually split."""

from __future__ import annotations

import re

import pytest
from oracles import count_paths_dag, dijkstra, transitive_closure

import recsql
from recsql.executor.strategies.skew import as_keys, balance, heavy

# This file tests the Spark loop's own machinery: every iteration runs on Spark. Splitting heavy
# keys is off by default (`spark.recsql.skew.enabled`), so its tests run with `-m slow`, which
# keeps the default suite within its 20 minutes.
pytestmark = [pytest.mark.usefixtures("spark_loop"), pytest.mark.slow]

# Balancing forced on: every key with a row is heavy (then the sketch's top keys are split).
FORCED = {"spark.recsql.skew.enabled": "true", "spark.recsql.skew.minRows": "1",
          "spark.recsql.skew.threshold": "0.01"}
OFF = {"spark.recsql.skew.enabled": "false"}
ON = {"spark.recsql.skew.enabled": "true"}  # the settings' thresholds (balancing is off by default)
# Balancing on (so each iteration's balance is observed) with no key ever heavy enough to split.
WATCHED = {"spark.recsql.skew.enabled": "true", "spark.recsql.skew.minRows": str(10**12)}

TC = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge)
  UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src)
SELECT X, Y FROM tc"""
SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""
# count() keyed by (source, node): the join key Node is a strict part of the group key.
PATHS = """WITH recursive paths (S, Node, count() AS N) AS (SELECT Src, Dst, 1 FROM edge)
  UNION (SELECT paths.S, edge.Dst, paths.N FROM paths, edge WHERE paths.Node = edge.Src)
SELECT S, Node, N FROM paths"""


def bintree(depth: int, up: bool) -> list[tuple[int, int]]:
    edges = [(child // 2, child) for child in range(2, 2 ** (depth + 1))]
    return [(c, p) for p, c in edges] if up else edges


def star() -> list[tuple[int, int, int]]:
    """A power-law-ish DAG: 40 leaves point into hub 1, hub 1 points to 40 others, which feed a
    second hub 2 and a short chain; weights vary so shortest paths are not hop counts."""
    edges = [(0, i, i % 5 + 1) for i in range(10, 50)]
    edges += [(i, 1, i % 7 + 1) for i in range(10, 50)]
    edges += [(1, j, j % 3 + 1) for j in range(100, 140)]
    edges += [(j, 2, 1 + j % 4) for j in range(100, 140)]
    edges += [(2, 200, 1), (200, 201, 2), (201, 202, 3)]
    return edges


def run(spark, query, conf):
    result = recsql.run(query, spark=spark, conf=conf)
    return sorted(tuple(r) for r in result.df.collect()), result.stats


def test_heavy_keys_exceed_the_threshold_share_of_a_partition():
    counts = {(1,): 900, (2,): 60, (3,): 40}
    assert heavy(counts, total=1000, partitions=4, threshold=0.5, min_rows=1) == {(1,): 900}
    assert heavy(counts, total=1000, partitions=4, threshold=0.1, min_rows=50) == {(1,): 900, (2,): 60}
    assert heavy(counts, total=1000, partitions=4, threshold=0.5, min_rows=1000) == {}


def test_balance_is_largest_task_over_rows_per_partition():
    assert balance({(0,): 25, (1,): 25, (2,): 25, (3,): 25}, 4) == 1.0
    assert balance({(2,): 100}, 4) == 4.0
    assert balance({}, 4) is None


def test_sketch_items_become_key_tuples_without_nulls():
    class Row(dict):
        pass

    items = [Row(item=7, count=3), Row(item=None, count=9)]
    assert as_keys(items) == {(7,): 3}


@pytest.mark.parametrize("conf, up", [
    pytest.param(FORCED, True, id="up-forced"), pytest.param(OFF, True, id="up-off"),
    pytest.param(FORCED, False, id="down-forced"),
])
def test_binary_tree_closure(spark, view, conf, up):
    edges = bintree(6, up)
    view("edge", edges, "Src BIGINT, Dst BIGINT")
    got, stats = run(spark, TC, conf)
    assert got == sorted(transitive_closure(edges))
    split = sum(s.split_keys for s in stats)
    assert (split > 0) == (conf is FORCED)


# The unbalanced (off) runs of the queries below are the existing code path, covered by
# test_algorithms.py and test_joinside.py; here balancing is forced on every key it can split.

def test_star_closure_splits_delta_and_base_heavy_keys(spark, view):
    edges = [(s, d) for s, d, _ in star()]
    view("edge", edges, "Src INT, Dst INT")
    got, stats = run(spark, TC, FORCED)
    assert got == sorted(transitive_closure(edges))
    assert sum(s.split_keys for s in stats) > 0


def test_sssp_min_with_a_hub(spark, view):
    view("edge", star(), "Src INT, Dst INT, Cost INT")
    got, stats = run(spark, SSSP, FORCED)
    assert got == sorted(dijkstra(star(), 0).items())
    # path is keyed by its join key (co-partitioned): only the hub's base rows can be heavy
    assert sum(s.split_keys for s in stats) > 0


def test_count_paths_per_source(spark, view):
    edges = [(s, d) for s, d, _ in star()]
    view("edge", edges, "Src INT, Dst INT")
    got, stats = run(spark, PATHS, FORCED)
    expected = set()
    for source in {s for s, _ in edges}:
        for node, n in count_paths_dag(edges, source).items():
            if node != source:
                expected.add((source, node, n))
    assert got == sorted(expected)
    assert sum(s.split_keys for s in stats) > 0


def test_heavy_keys_are_split_and_even_the_join(spark, view):
    """Late iterations of an up tree put the whole delta on a few keys: split, the largest task
    of the join holds far less than without splitting. Four partitions, not the suite's two (one
    per task slot): a partition's share can only fall so far below all of two."""
    view("edge", bintree(8, up=True), "Src BIGINT, Dst BIGINT")
    four = {"spark.recsql.partitions": "4"}
    off = {s.iteration: s for s in run(spark, TC, {**WATCHED, **four})[1]}
    on = {s.iteration: s for s in run(spark, TC, {**ON, **four, "spark.recsql.skew.minRows": "1"})[1]}
    assert all(s.split_keys == 0 for s in off.values())
    recorded = [s for s in off.values() if s.iteration and s.delta_rows]
    assert recorded and all(s.balance is not None and s.balance >= 1.0 for s in recorded)
    late = [i for i, s in on.items() if s.split_keys and s.balance and off[i].balance]
    assert late, "no iteration split a key"
    assert sum(on[i].balance for i in late) < sum(off[i].balance for i in late)
    assert max(on[i].balance for i in late) <= 1.5 < max(off[i].balance for i in late)


def test_no_heavy_key_leaves_the_iteration_plan_as_it_was(spark, view):
    view("edge", bintree(5, up=True), "Src BIGINT, Dst BIGINT")

    def plan(conf):
        text = recsql.explain(TC, spark=spark, conf=conf)
        return re.sub(r"#\d+|plan_id=\d+|\[id=\d+\]", "", text)

    assert plan(ON) == plan(OFF)


def test_a_join_on_two_columns_runs_unsplit_and_gives_the_fixpoint(spark, view):
    # approx_top_k cannot count a struct key, so heavy keys of two columns are not looked for
    edges = [(0, 1, 1, 1, 2), (0, 1, 1, 2, 1), (1, 2, 1, 2, 2), (2, 2, 1, 3, 3), (3, 3, 3, 1, 1)]
    edges += [(0, 1, 1, 10 + k, 1) for k in range(30)]
    view("edge", edges, "S INT, A INT, B INT, C INT, D INT")
    query = """WITH recursive r (S, A, B) AS (SELECT S, A, B FROM edge)
      UNION (SELECT r.S, edge.C, edge.D FROM r, edge WHERE r.A = edge.A AND r.B = edge.B)
    SELECT S, A, B FROM r"""
    expected = {(s, a, b) for s, a, b, _, _ in edges}
    while True:  # a plain-Python fixpoint
        more = {(s, c, d) for s, a, b in expected for _, ea, eb, c, d in edges if (a, b) == (ea, eb)}
        if more <= expected:
            break
        expected |= more
    rows, stats = run(spark, query, {**FORCED, "spark.recsql.endgame.enabled": "false"})
    assert set(rows) == expected and len(rows) == len(expected)
    assert not any(s.split_keys for s in stats)
