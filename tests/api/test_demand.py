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


@pytest.mark.parametrize("edges", [5], indirect=True)
def test_in_with_a_null_on_a_stored_recursive_view_is_pushed_and_explained(spark, edges):
    """`x IN (7, NULL)` keeps the rows `x = 7` keeps (the NULL compares unknown): pushed as
    written, and EXPLAIN says so (docs/dialect.md section 4)."""
    spark.sql("DROP VIEW IF EXISTS dm_closure_in")
    recsql.sql("CREATE TEMPORARY VIEW dm_closure_in AS " + TC.replace(" WHERE {where}", "")
               .replace("SELECT X, Y FROM tc", "SELECT X AS node, Y AS reached FROM tc"), spark=spark)
    try:
        for query, sources in [("SELECT reached FROM dm_closure_in WHERE node IN (7, NULL)", {7}),
                               ("SELECT reached FROM dm_closure_in WHERE node IN (NULL, 3, 7)", {3, 7})]:
            result = recsql.run(query, spark=spark)
            expected = sorted((y,) for x, y in closure_from(edges, sources))
            assert rows(result.df) == expected
            pushed = query.split("WHERE ")[1]
            assert result.plan.demand == [f"demand: pushed {pushed} into the base branches of dm_closure_in__tc"]
            assert f"demand: pushed {pushed}" in recsql.explain(query, spark=spark)
    finally:
        spark.sql("DROP VIEW IF EXISTS dm_closure_in")


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


# ------------------------------------------- reads filtered on different columns: one copy each

def shaped_graph(seed: int, nodes: int = 30, edges: int = 45) -> list[tuple]:
    """Random edges, plus a diamond 0->1,2->3, a cycle 3->4->5->3 and self-loops on 4 and 6."""
    rng = random.Random(seed)
    made = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}
    made |= {(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (4, 5), (5, 3), (4, 4), (6, 6)}
    return sorted((s, d, 1) for s, d in made)


@pytest.fixture
def shaped(spark, request):
    data = shaped_graph(request.param)
    spark.createDataFrame(data, "Src int, Dst int, Cost int").createOrReplaceTempView("dm_edge")
    spark.sql("DROP VIEW IF EXISTS dm_closure3")
    recsql.sql("CREATE TEMPORARY VIEW dm_closure3 AS " + TC.replace(" WHERE {where}", "")
               .replace("SELECT X, Y FROM tc", "SELECT X AS node, Y AS reached FROM tc"), spark=spark)
    yield data
    spark.sql("DROP VIEW IF EXISTS dm_closure3")
    spark.catalog.dropTempView("dm_edge")


def reached_by_networkx(edges) -> dict:
    """Each node's set of nodes at the end of a path of at least one edge."""
    g = nx.DiGraph([(s, d) for s, d, _ in edges])
    return {x: nx.descendants(g, x) | ({x} if any(nx.has_path(g, s, x) for s in g.successors(x))
                                       else set()) for x in g}


# the statement read through the stored view, or through a WITH of its own
SOURCES = {
    "view": ("", "dm_closure3", "node", "reached"),
    "with": (TC.replace("SELECT X, Y FROM tc WHERE {where}", ""), "tc", "X", "Y"),
}
SHAPES = {
    "self-join": "SELECT a.{reached} FROM {c} a JOIN {c} b ON a.{reached} = b.{node} "
                 "WHERE a.{node} = {s} AND b.{reached} = {t}",
    "union": "SELECT {reached} FROM {c} WHERE {node} = {s} UNION SELECT {node} FROM {c} WHERE {reached} = {t}",
    "intersect": "SELECT {reached} FROM {c} WHERE {node} = {s} INTERSECT "
                 "SELECT {node} FROM {c} WHERE {reached} = {t}",
    "except": "SELECT {reached} FROM {c} WHERE {node} = {s} EXCEPT SELECT {node} FROM {c} WHERE {reached} = {t}",
}


def expected_rows(shape: str, closure: set, s: int, t: int) -> list[tuple]:
    after_s = {y for x, y in closure if x == s}
    before_t = {x for x, y in closure if y == t}
    between = {m for m in after_s if (m, t) in closure}  # the self-join: one row per middle node
    found = {"self-join": between, "union": after_s | before_t, "intersect": after_s & before_t,
             "except": after_s - before_t}[shape]
    return sorted((m,) for m in found)


@pytest.mark.parametrize("shaped", [11, 12], indirect=True)
@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reads_bound_at_either_end_each_get_their_recursion(spark, shaped, source, shape):
    """One read filtered on the source, one on the target: a recursion forwards from s and a copy
    backwards from t, each with only its rows; the answer is networkx's and the unpushed run's."""
    with_, c, node, reached = SOURCES[source]
    s, t = 0, 5
    query = with_ + SHAPES[shape].format(c=c, node=node, reached=reached, s=s, t=t)
    closure = oracles.transitive_closure(shaped)
    by_networkx = reached_by_networkx(shaped)
    assert closure == {(x, y) for x, ys in by_networkx.items() for y in ys}
    expected = expected_rows(shape, closure, s, t)
    assert expected and (shape != "self-join" or len(expected) > 1)  # 3 and 4 lie on paths 0 -> 5
    on = recsql.run(query, spark=spark)
    off = recsql.run(query, spark=spark, conf=OFF)
    assert rows(on.df) == expected == rows(off.df)
    recursion = "dm_closure3__tc" if source == "view" else "tc"
    forwards, backwards = on.plan.demand
    assert forwards.startswith(f"demand: pushed {node} = {s} into the base branches of {recursion} "
                               f"(for {c}'s read 1")
    assert backwards.startswith(f"demand: pushed {reached} = {t} into the base branches of "
                                f"{recursion}__demand1, evaluated backwards")
    assert backwards.endswith(f"of 2, on its own copy {c}__demand1)")
    explained = recsql.explain(query, spark=spark)
    assert forwards in explained and backwards in explained and off.plan.demand == []
    rows_of = {cte: max(st.total_rows for st in on.stats if st.cte == cte)
               for cte in (recursion, f"{recursion}__demand1")}
    assert rows_of == {recursion: len({r for r in closure if r[0] == s}),
                       f"{recursion}__demand1": len({r for r in closure if r[1] == t})}


@pytest.mark.parametrize("shaped", [13], indirect=True)
def test_a_read_without_a_pushable_filter_keeps_the_whole_recursion(spark, shaped):
    query = ("SELECT reached FROM dm_closure3 WHERE node = 0 UNION "
             "SELECT node FROM dm_closure3 WHERE reached IN (SELECT 5)")
    closure = oracles.transitive_closure(shaped)
    expected = sorted({(y,) for x, y in closure if x == 0} | {(x,) for x, y in closure if y == 5})
    on = recsql.run(query, spark=spark)
    assert rows(on.df) == expected
    assert on.plan.demand == ["demand: not pushed node = 0 into dm_closure3: dm_closure3 is read 2 "
                              "times and not every read is filtered (an unfiltered read needs the "
                              "whole recursion)"]
    assert {st.cte for st in on.stats} == {"dm_closure3__tc"}  # no copy
    assert max(st.total_rows for st in on.stats) == len(closure)


@pytest.mark.parametrize("shaped", [14], indirect=True)
def test_two_reads_share_a_recursion_a_third_has_its_copy(spark, shaped):
    """Reads 1 and 3 filter the source (the OR of their filters on the recursion as written),
    read 2 the target (its own copy, backwards)."""
    query = (TC.replace("SELECT X, Y FROM tc WHERE {where}", "")
             + "SELECT Y FROM tc WHERE X = 0 UNION SELECT X FROM tc WHERE Y IN (3, 5) "
               "EXCEPT SELECT Y FROM tc WHERE X BETWEEN 4 AND 6")
    closure = oracles.transitive_closure(shaped)
    expected = sorted(({y for x, y in closure if x == 0} | {x for x, y in closure if y in (3, 5)})
                      - {y for x, y in closure if 4 <= x <= 6})
    on = recsql.run(query, spark=spark)
    assert rows(on.df) == [(v,) for v in expected] == rows(recsql.sql(query, spark=spark, conf=OFF))
    assert on.plan.demand[0] == ("demand: pushed X = 0 OR X BETWEEN 4 AND 6 into the base branches "
                                 "of tc (for tc's reads 1, 3 of 3)")
    assert on.plan.demand[1].endswith("(for tc's read 2 of 3, on its own copy tc__demand1)")
    sizes = {cte: max(st.total_rows for st in on.stats if st.cte == cte) for cte in ("tc", "tc__demand1")}
    assert sizes == {"tc": len({r for r in closure if r[0] == 0 or 4 <= r[0] <= 6}),
                     "tc__demand1": len({r for r in closure if r[1] in (3, 5)})}


@pytest.mark.parametrize("shaped", [15], indirect=True)
def test_copies_on_the_spark_loop(spark, spark_loop, shaped):
    """The same self-join with every iteration on Spark (no driver endgame)."""
    query = SHAPES["self-join"].format(c="dm_closure3", node="node", reached="reached", s=0, t=3)
    closure = oracles.transitive_closure(shaped)
    on = recsql.run(query, spark=spark)
    assert rows(on.df) == expected_rows("self-join", closure, 0, 3)
    assert {st.cte for st in on.stats} == {"dm_closure3__tc", "dm_closure3__tc__demand1"}
