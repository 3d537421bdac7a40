"""Demand-driven evaluation on Spark (the default, spark.recsql.demand.enabled=true): a filtered
recursive CTE or view answers as networkx / Dijkstra / a plain-Python fixpoint do, and as the
unpushed run does, while its recursion produces only the rows the filter asks for."""

from __future__ import annotations

import random

import networkx as nx
import oracles
import pytest
from conftest import rows

import recsql

OFF = {"spark.recsql.demand.enabled": "false"}
TC = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM dm_edge)
  UNION (SELECT tc.X, dm_edge.Dst FROM tc, dm_edge WHERE tc.Y = dm_edge.Src)
SELECT X, Y FROM tc WHERE {where}"""
APSP = """WITH recursive path (Src, Dst, min() AS Cost) AS (SELECT Src, Dst, Cost FROM dm_edge)
  UNION (SELECT path.Src, dm_edge.Dst, path.Cost + dm_edge.Cost FROM path, dm_edge
         WHERE path.Dst = dm_edge.Src)
SELECT Src, Dst, Cost FROM path WHERE {where}"""


def graph(seed: int, nodes: int = 40, edges: int = 70):
    """A random directed graph with cycles and self-loops, positive integer costs."""
    rng = random.Random(seed)
    return sorted({(rng.randrange(nodes), rng.randrange(nodes), rng.randint(1, 9)) for _ in range(edges)})


def closure_from(edges, sources) -> list[tuple]:
    return sorted((x, y) for x, y in oracles.transitive_closure(edges) if x in sources)


@pytest.fixture
def edges(spark, request):
    data = graph(request.param)
    spark.createDataFrame(data, "Src int, Dst int, Cost int").createOrReplaceTempView("dm_edge")
    yield data
    spark.catalog.dropTempView("dm_edge")


def produced(result) -> int:
    """Rows the recursion produced: the final state's size."""
    return max(s.total_rows for s in result.stats)


@pytest.mark.parametrize("edges", [1, 2], indirect=True)
@pytest.mark.parametrize("where, sources", [
    ("X = 3", {3}),
    ("X IN (1, 5, 7)", {1, 5, 7}),
    ("X BETWEEN 10 AND 12 AND Y > 4", set(range(10, 13))),
])
def test_transitive_closure_filtered_on_its_source(spark, edges, where, sources):
    expected = closure_from(edges, sources)
    if "Y > 4" in where:
        expected = [r for r in expected if r[1] > 4]
    g = nx.DiGraph([(s, d) for s, d, _ in edges])  # networkx agrees with the fixpoint oracle
    by_networkx = sorted((x, y) for x in sources if x in g for y in nx.descendants(g, x) | (
        {x} if any(nx.has_path(g, s, x) for s in g.successors(x)) else set()))
    assert [r for r in by_networkx if "Y > 4" not in where or r[1] > 4] == expected
    on = recsql.run(TC.format(where=where), spark=spark)
    off = recsql.run(TC.format(where=where), spark=spark, conf=OFF)
    assert rows(on.df) == expected == rows(off.df)
    assert produced(on) <= produced(off)
    assert "demand: pushed" in on.plan.demand[0] and off.plan.demand == []


@pytest.mark.parametrize("edges", [3], indirect=True)
def test_shortest_paths_from_one_source(spark, edges):
    source = edges[0][0]
    expected = sorted((source, d, c) for d, c in oracles.dijkstra(edges, source).items() if d != source or
                      any(e[1] == source for e in edges))
    got = rows(recsql.sql(APSP.format(where=f"Src = {source}"), spark=spark))
    # Dijkstra's distance to the source itself is 0; the CTE's is its shortest cycle
    assert [r for r in got if r[1] != source] == [r for r in expected if r[1] != source]
    assert got == rows(recsql.sql(APSP.format(where=f"Src = {source}"), spark=spark, conf=OFF))


@pytest.mark.parametrize("edges", [4], indirect=True)
def test_a_filter_on_the_far_end_runs_backwards(spark, edges):
    result = recsql.run(TC.format(where="Y IN (5, 6)"), spark=spark)
    g = nx.DiGraph([(s, d) for s, d, _ in edges])
    expected = sorted((x, y) for y in (5, 6) if y in g for x in nx.ancestors(g, y) | (
        {y} if any(nx.has_path(g, s, y) for s in g.successors(y)) else set()))
    assert rows(result.df) == expected
    assert rows(result.df) == sorted((x, y) for x, y in oracles.transitive_closure(edges) if y in (5, 6))
    assert "evaluated backwards" in result.plan.demand[0]
    assert produced(result) == len(expected)


@pytest.mark.parametrize("edges", [5], indirect=True)
def test_through_a_stored_recursive_view(spark, edges):
    spark.sql("DROP VIEW IF EXISTS dm_closure")
    recsql.sql("CREATE TEMPORARY VIEW dm_closure AS " + TC.replace(" WHERE {where}", "")
               .replace("SELECT X, Y FROM tc", "SELECT X AS boss, Y AS member FROM tc"), spark=spark)
    try:
        query = "SELECT member FROM dm_closure WHERE boss = 3"
        result = recsql.run(query, spark=spark)
        expected = sorted((y,) for x, y in closure_from(edges, {3}))
        assert rows(result.df) == expected == rows(recsql.sql(query, spark=spark, conf=OFF))
        assert result.plan.demand == ["demand: pushed boss = 3 into the base branches of dm_closure__tc"]
        explained = recsql.explain(query, spark=spark)
        assert "demand: pushed boss = 3" in explained
    finally:
        spark.sql("DROP VIEW IF EXISTS dm_closure")


@pytest.mark.parametrize("edges", [6, 7], indirect=True)
def test_a_final_union_pushes_either_branchs_filter(spark, edges):
    """Each branch of the final UNION reads the closure filtered on its own binding (one on the
    carried end, one on both ends); the recursion holds either's rows."""
    query = TC.replace(" WHERE {where}", " WHERE X = 3 UNION SELECT X, Y FROM tc WHERE X IN (5, 8) "
                                         "AND Y > 10")
    g = nx.DiGraph([(s, d) for s, d, _ in edges])
    reached = {x: nx.descendants(g, x) | ({x} if any(nx.has_path(g, s, x) for s in g.successors(x))
                                         else set()) for x in (3, 5, 8) if x in g}
    expected = sorted({(3, y) for y in reached.get(3, ())}
                      | {(x, y) for x in (5, 8) for y in reached.get(x, ()) if y > 10})
    assert expected == sorted(set(closure_from(edges, {3}))
                              | {r for r in closure_from(edges, {5, 8}) if r[1] > 10})
    on = recsql.run(query, spark=spark)
    off = recsql.run(query, spark=spark, conf=OFF)
    assert rows(on.df) == expected == rows(off.df)
    assert on.plan.demand == ["demand: pushed X = 3 OR X IN (5, 8) into the base branches of tc "
                              "(for its 2 reads)"] and off.plan.demand == []
    assert produced(on) == len(closure_from(edges, {3, 5, 8})) < produced(off)


@pytest.mark.parametrize("edges", [8], indirect=True)
def test_common_ancestors_through_a_view_read_twice(spark, edges):
    """A BI tool's self-join of a closure view, both reads bound on the far end: evaluated
    backwards from either node."""
    spark.sql("DROP VIEW IF EXISTS dm_closure2")
    recsql.sql("CREATE TEMPORARY VIEW dm_closure2 AS " + TC.replace(" WHERE {where}", "")
               .replace("SELECT X, Y FROM tc", "SELECT X AS node, Y AS reached FROM tc"), spark=spark)
    try:
        query = ("SELECT a.node FROM dm_closure2 a JOIN dm_closure2 b ON a.node = b.node "
                 "WHERE a.reached = 5 AND b.reached = 6")
        g = nx.DiGraph([(s, d) for s, d, _ in edges])

        def ancestors(y):  # nodes with a path of at least one edge to y
            return {x for x in g if any(nx.has_path(g, s, y) for s in g.successors(x))} if y in g else set()
        expected = sorted((x,) for x in ancestors(5) & ancestors(6))
        closure = oracles.transitive_closure(edges)
        assert expected == sorted((x,) for x, y in closure if y == 5 and (x, 6) in closure)
        assert expected, "the graph should give 5 and 6 a common ancestor"
        on = recsql.run(query, spark=spark)
        assert rows(on.df) == expected == rows(recsql.sql(query, spark=spark, conf=OFF))
        assert on.plan.demand[0].startswith(
            "demand: pushed reached = 5 OR reached = 6 into the base branches of dm_closure2__tc, "
            "evaluated backwards")
        assert produced(on) == len([r for r in closure if r[1] in (5, 6)])
    finally:
        spark.sql("DROP VIEW IF EXISTS dm_closure2")
