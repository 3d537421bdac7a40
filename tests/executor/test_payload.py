"""Payload columns (`argmin(Cost) AS Pred`, `argmax`): the winning derivation's columns, ties
broken by the payload. Checked against plain-Python Dijkstra / longest-path oracles that break
ties the same way (tests/oracles.py), on generated graphs full of ties and on a real graph, on
the default path (the driver endgame) and on the Spark loop."""

from __future__ import annotations

import gzip
import random

import pytest
from conftest import rows
from oracles import dijkstra_predecessors, longest_dag_paths, routes

import recsql

PATHS = {"default": {}, "spark_loop": {"spark.recsql.endgame.enabled": "false"}}

SSSP = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT :src, 0, :src)
  UNION (SELECT e.Dst, path.Cost + e.Cost, e.Src FROM path, {edges} e WHERE path.Dst = e.Src)
SELECT Dst, Cost, Pred FROM path"""

# the predecessors walked back into an array per destination, in a later (UNION ALL) CTE
ROUTES = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT :src, 0, :src)
  UNION (SELECT e.Dst, path.Cost + e.Cost, e.Src FROM path, {edges} e WHERE path.Dst = e.Src),
route (Dst, At, Nodes) AS (SELECT Dst, Dst, array(Dst) FROM path)
  UNION ALL (SELECT route.Dst, path.Pred, concat(array(path.Pred), route.Nodes)
             FROM route, path WHERE route.At = path.Dst AND path.Pred <> path.Dst)
SELECT Dst, Nodes FROM route WHERE At = :src"""


def tied_graph(seed: int, nodes: int = 40, edges: int = 160) -> list[tuple[int, int, int]]:
    """A random digraph with costs 1-3 and parallel edges: many equally cheap routes."""
    rng = random.Random(seed)
    return [(rng.randrange(nodes), rng.randrange(nodes), rng.randint(1, 3)) for _ in range(edges)]


def check_sssp(spark, table: str, edges, source: int, conf: dict) -> recsql.Result:
    result = recsql.run(SSSP.format(edges=table), args={"src": source}, spark=spark, conf=conf)
    best = dijkstra_predecessors(edges, source, (source,))
    assert rows(result.df) == sorted((v, c, p) for v, (c, p) in best.items())
    return result


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", range(3))
def test_sssp_predecessors_on_tied_graphs(spark, view, seed, path):
    edges = tied_graph(seed)
    view("tied", edges, "Src INT, Dst INT, Cost INT")
    result = check_sssp(spark, "tied", edges, edges[0][0], PATHS[path])
    assert {s.ran_on for s in result.stats} == ({"driver"} if path == "default" else {"spark"})
    cost = {v: t[0] for v, t in dijkstra_predecessors(edges, edges[0][0], (0,)).items()}
    tight = [{u for u, w, c in edges if w == v and u in cost and cost[u] + c == cost[v]}
             for v in cost]
    assert sum(len(t) > 1 for t in tight) >= 5  # equally cheap predecessors the payload decides


@pytest.mark.parametrize("path", PATHS)
def test_routes_walk_the_predecessors_back(spark, view, path):
    edges = tied_graph(7)
    view("tied", edges, "Src INT, Dst INT, Cost INT")
    source = edges[0][0]
    got = recsql.sql(ROUTES.format(edges="tied"), args={"src": source}, spark=spark, conf=PATHS[path])
    best = dijkstra_predecessors(edges, source, (source,))
    expected = routes({v: p for v, (_, p) in best.items()}, source)
    assert sorted((r.Dst, list(r.Nodes)) for r in got.collect()) == sorted(expected.items())
    assert max(len(r) for r in expected.values()) >= 4


@pytest.mark.parametrize("path", PATHS)
def test_two_payload_columns_break_ties_in_head_order(spark, view, path):
    """Parallel edges of equal cost differ by label: the tuple (Cost, Pred, Via) decides."""
    rng = random.Random(11)
    edges = [(rng.randrange(25), rng.randrange(25), rng.randint(1, 2), rng.choice("abcé"))
             for _ in range(120)]
    view("labelled", edges, "Src INT, Dst INT, Cost INT, Label STRING")
    source = edges[0][0]
    q = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred, argmin(Cost) AS Via)
             AS (SELECT :src, 0, :src, '')
             UNION (SELECT e.Dst, path.Cost + e.Cost, e.Src, e.Label FROM path, labelled e
                    WHERE path.Dst = e.Src)
           SELECT Dst, Cost, Pred, Via FROM path"""
    got = rows(recsql.sql(q, args={"src": source}, spark=spark, conf=PATHS[path]))
    best = dijkstra_predecessors(edges, source, (source, ""))
    assert got == sorted((v, *t) for v, t in best.items())


@pytest.mark.parametrize("path", PATHS)
def test_argmax_longest_path_in_a_dag(spark, view, path):
    rng = random.Random(5)
    edges = [(u, v, rng.randint(1, 3)) for u, v in
             {tuple(sorted(rng.sample(range(30), 2))) for _ in range(90)}]
    view("dag", edges, "Src INT, Dst INT, Cost INT")
    q = """WITH recursive longest (Dst, max() AS Cost, argmax(Cost) AS Pred) AS (SELECT 0, 0, 0)
             UNION (SELECT d.Dst, longest.Cost + d.Cost, d.Src FROM longest, dag d
                    WHERE longest.Dst = d.Src)
           SELECT Dst, Cost, Pred FROM longest"""
    got = rows(recsql.sql(q, spark=spark, conf=PATHS[path]))
    assert got == sorted((v, c, p) for v, (c, p) in longest_dag_paths(edges, 0).items())


@pytest.mark.parametrize("path", PATHS)
def test_email_eu_core_unit_cost_predecessors(spark, data_dir, view, path):
    """A real graph with unit costs: most nodes have several shortest-path predecessors."""
    with gzip.open(data_dir / "graphs" / "email-Eu-core.tsv.gz", "rt") as f:
        pairs = [tuple(map(int, line.split()[:2])) for line in f if not line.startswith("#")]
    edges = [(u, v, 1) for u, v in pairs]
    view("eu_unit", edges, "Src INT, Dst INT, Cost INT")
    result = check_sssp(spark, "eu_unit", edges, pairs[0][0], PATHS[path])
    assert result.df.count() > 500


@pytest.mark.parametrize("path", PATHS)
def test_min_by_spelling_tools_parse(spark, view, path):
    """Spark's grammar: MIN_BY(payload, value) beside MIN(value) with GROUP BY in the recursive
    term is the head `argmin(Cost) AS Pred` (docs/dialect.md section 1)."""
    edges = tied_graph(3)
    view("tied", edges, "Src INT, Dst INT, Cost INT")
    source = edges[0][0]
    q = """WITH RECURSIVE path (dst, cost, pred) AS (
             SELECT :src, 0, :src
             UNION
             SELECT e.Dst, MIN(p.cost + e.Cost), MIN_BY(e.Src, p.cost + e.Cost)
             FROM path p JOIN tied e ON p.dst = e.Src GROUP BY e.Dst)
           SELECT dst, cost, pred FROM path"""
    got = rows(recsql.sql(q, args={"src": source}, spark=spark, conf=PATHS[path]))
    best = dijkstra_predecessors(edges, source, (source,))
    assert got == sorted((v, c, p) for v, (c, p) in best.items())


def test_a_payload_spark_cannot_order_is_a_clear_error(spark, view):
    from recsql.errors import RecSQLAnalysisError

    view("tiny", [(1, 2, 1)], "Src INT, Dst INT, Cost INT")
    q = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Tags) AS (SELECT 1, 0, map(1, 1))
             UNION (SELECT e.Dst, path.Cost + e.Cost, map(e.Src, 1) FROM path, tiny e WHERE path.Dst = e.Src)
           SELECT * FROM path"""
    with pytest.raises(RecSQLAnalysisError) as info:
        recsql.sql(q, spark=spark)
    error = info.value
    assert error.condition == "RECSQL_UNORDERABLE_AGGREGATE"
    assert "`Tags`" in error.message and "map<int,int>" in error.message
    assert (error.line, error.pos) == (1, q.index("argmin"))
