"""Property-based tests on small random graphs (hypothesis), each against a Python oracle."""

from __future__ import annotations

import oracles
from conftest import register, rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recsql

FEW = settings(max_examples=8, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

nodes = st.integers(min_value=0, max_value=7)
edge_lists = st.lists(st.tuples(nodes, nodes), min_size=1, max_size=14)
weighted_lists = st.lists(st.tuples(nodes, nodes, st.integers(min_value=0, max_value=9)), min_size=1, max_size=14)


@FEW
@given(edges=edge_lists)
def test_random_transitive_closure(spark, edges):
    register(spark, "rg_arc", edges, "Src int, Dst int")
    q = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM rg_arc)
             UNION (SELECT tc.X, rg_arc.Dst FROM tc, rg_arc WHERE tc.Y = rg_arc.Src)
           SELECT X, Y FROM tc"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.transitive_closure(edges))


@FEW
@given(edges=weighted_lists, source=nodes)
def test_random_sssp(spark, edges, source):
    register(spark, "rg_wedge", edges, "Src int, Dst int, Cost int")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT :src, 0)
             UNION (SELECT rg_wedge.Dst, path.Cost + rg_wedge.Cost FROM path, rg_wedge
                    WHERE path.Dst = rg_wedge.Src)
           SELECT Dst, Cost FROM path"""
    got = rows(recsql.sql(q, args={"src": source}, spark=spark))
    assert got == sorted(oracles.dijkstra(edges, source).items())


@FEW
@given(edges=edge_lists)
def test_random_connected_components(spark, edges):
    register(spark, "rg_uedge", edges, "A int, B int")
    q = """WITH sym AS (SELECT A AS Src, B AS Dst FROM rg_uedge UNION SELECT B, A FROM rg_uedge),
           recursive cc (Node, min() AS Comp) AS (SELECT Src, Src FROM sym)
             UNION (SELECT sym.Dst, cc.Comp FROM cc, sym WHERE cc.Node = sym.Src)
           SELECT Node, Comp FROM cc"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.min_label_components(edges))


@FEW
@given(pairs=st.lists(st.tuples(nodes, nodes), min_size=1, max_size=14))
def test_random_dag_count_paths(spark, pairs):
    dag = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b}) or [(0, 1)]
    register(spark, "rg_dag", dag, "A int, B int")
    start = dag[0][0]
    q = """WITH recursive paths (X, count() AS Cnt) AS (SELECT {start}, 1)
             UNION (SELECT rg_dag.B, paths.Cnt FROM paths, rg_dag WHERE paths.X = rg_dag.A)
           SELECT X, Cnt FROM paths"""
    got = rows(recsql.sql(q, start=start, spark=spark))
    assert got == sorted(oracles.count_paths_dag(dag, start).items())
