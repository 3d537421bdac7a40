"""Classic recursive queries on small graphs, each against an independent oracle."""

from __future__ import annotations

import networkx as nx
import numpy as np
import oracles
import pytest
from conftest import approx_rows, rows
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

import recsql

CYCLIC = [(1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 4), (7, 8), (2, 9), (9, 10)]
WEIGHTED = [
    (1, 2, 7), (1, 3, 9), (1, 6, 14), (2, 3, 10), (2, 4, 15), (3, 4, 11), (3, 6, 2),
    (4, 5, 6), (5, 6, 9), (6, 5, 9), (6, 1, 3), (7, 8, 1), (5, 7, 20),
]
DAG = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (4, 6), (5, 7), (6, 7), (1, 7), (2, 5), (8, 9)]


@pytest.fixture
def cyclic(view):
    return view("arc", CYCLIC, "Src int, Dst int")


@pytest.fixture
def weighted(view):
    return view("edge", WEIGHTED, "Src int, Dst int, Cost int")


# ----------------------------------------------------------------------------- transitive closure

TC_QUERIES = {
    "left-linear": """
        WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM arc)
          UNION (SELECT tc.X, arc.Dst FROM tc, arc WHERE tc.Y = arc.Src)
        SELECT X, Y FROM tc""",
    "right-linear": """
        WITH RECURSIVE tc (X, Y) AS (
          SELECT Src, Dst FROM arc
          UNION
          SELECT arc.Src, tc.Y FROM arc JOIN tc ON arc.Dst = tc.X)
        SELECT X, Y FROM tc""",
    "non-linear": """
        WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM arc)
          UNION (SELECT a.X, b.Y FROM tc a, tc b WHERE a.Y = b.X)
        SELECT X, Y FROM tc""",
}


@pytest.mark.parametrize("shape", list(TC_QUERIES))
def test_transitive_closure(spark, cyclic, shape):
    got = rows(recsql.sql(TC_QUERIES[shape], spark=spark))
    assert got == sorted(oracles.transitive_closure(CYCLIC))
    # and networkx agrees with the hand-written oracle (reflexive=False: self-loops on cycles)
    g = nx.DiGraph(CYCLIC)
    assert set(got) == set(nx.transitive_closure(g, reflexive=False).edges())


def test_nonlinear_tc_stats_count_fewer_iterations(spark, view):
    chain = [(i, i + 1) for i in range(10)]
    view("arc", chain, "Src int, Dst int")
    lin = recsql.run(TC_QUERIES["left-linear"], spark=spark)
    non = recsql.run(TC_QUERIES["non-linear"], spark=spark)
    expected = sorted(oracles.transitive_closure(chain))
    assert rows(lin.df) == rows(non.df) == expected
    # doubling: about log2(10) iterations instead of 10
    assert max(s.iteration for s in non.stats) < max(s.iteration for s in lin.stats)


# ----------------------------------------------------------------------------- reachability

def test_reachability(spark, cyclic):
    q = """WITH recursive reach (Node) AS (SELECT 2) UNION
             (SELECT arc.Dst FROM reach, arc WHERE reach.Node = arc.Src)
           SELECT Node FROM reach"""
    got = {r[0] for r in recsql.sql(q, spark=spark).collect()}
    assert got == oracles.reachable(CYCLIC, 2)
    assert got == {2} | nx.descendants(nx.DiGraph(CYCLIC), 2)


def test_reachability_from_unknown_start_is_just_the_start(spark, cyclic):
    q = """WITH RECURSIVE reach (Node) AS (SELECT 99 UNION
             SELECT arc.Dst FROM reach JOIN arc ON reach.Node = arc.Src)
           SELECT Node FROM reach"""
    assert rows(recsql.sql(q, spark=spark)) == [(99,)]


# ----------------------------------------------------------------------------- same generation

PARENT_CHILD = [(1, 2), (1, 3), (2, 4), (2, 5), (3, 6), (3, 7), (4, 8), (6, 9), (6, 10), (7, 11), (11, 12)]


def test_same_generation(spark, view):
    view("rel", PARENT_CHILD, "Parent int, Child int")
    q = """WITH recursive sg (X, Y) AS
             (SELECT a.Child, b.Child FROM rel a, rel b WHERE a.Parent = b.Parent AND a.Child <> b.Child)
           UNION
             (SELECT a.Child, b.Child FROM rel a, sg, rel b WHERE a.Parent = sg.X AND b.Parent = sg.Y)
           SELECT X, Y FROM sg"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.same_generation(PARENT_CHILD))


# ----------------------------------------------------------------------------- shortest paths

def test_sssp(spark, weighted):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
           SELECT Dst, Cost FROM path"""
    got = rows(recsql.sql(q, spark=spark))
    assert got == sorted(oracles.dijkstra(WEIGHTED, 1).items())
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert dict(got) == nx.single_source_dijkstra_path_length(g, 1)


@pytest.mark.parametrize("endgame", ["true", "false"])
def test_sssp_over_a_table_with_column_aliases(spark, weighted, endgame):
    # `edge AS e(s, d, c)` is read as written (it once failed: `s` is not a column of edge)
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT e.d, path.Cost + e.c FROM path, edge AS e(s, d, c) WHERE path.Dst = e.s)
           SELECT Dst, Cost FROM path"""
    got = rows(recsql.sql(q, spark=spark, conf={"spark.recsql.endgame.enabled": endgame}))
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert dict(got) == nx.single_source_dijkstra_path_length(g, 1)


@pytest.mark.parametrize("endgame", ["true", "false"])
def test_sssp_with_the_aggregate_before_the_key(spark, weighted, endgame):
    # the merge aggregates by the key, which puts it first: the head's own order is kept
    q = """WITH recursive path (min() AS Cost, Dst) AS (SELECT 0, 1)
             UNION (SELECT path.Cost + edge.Cost, edge.Dst FROM path, edge WHERE path.Dst = edge.Src)
           SELECT * FROM path"""
    df = recsql.sql(q, spark=spark, conf={"spark.recsql.endgame.enabled": endgame})
    assert df.columns == ["Cost", "Dst"]
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert {dst: cost for cost, dst in rows(df)} == nx.single_source_dijkstra_path_length(g, 1)


def test_sssp_standard_form_order_by_limit(spark, weighted):
    q = """WITH RECURSIVE path (Dst, min() AS Cost) AS (
             SELECT 1, 0
             UNION
             SELECT e.Dst, p.Cost + e.Cost FROM path p JOIN edge e ON p.Dst = e.Src)
           SELECT * FROM path ORDER BY Cost, Dst LIMIT 3"""
    got = [tuple(r) for r in recsql.sql(q, spark=spark).collect()]
    expected = sorted(oracles.dijkstra(WEIGHTED, 1).items(), key=lambda kv: (kv[1], kv[0]))[:3]
    assert got == expected


def test_apsp(spark, weighted):
    q = """WITH recursive sp (X, Y, min() AS Cost) AS (SELECT Src, Dst, Cost FROM edge)
             UNION (SELECT sp.X, edge.Dst, sp.Cost + edge.Cost FROM sp, edge WHERE sp.Y = edge.Src)
           SELECT X, Y, Cost FROM sp"""
    got = rows(recsql.sql(q, spark=spark))
    assert got == sorted(oracles.apsp_nonempty(WEIGHTED))
    # scipy agrees off the diagonal
    n = 9
    m = np.full((n, n), np.inf)
    for u, v, c in WEIGHTED:
        m[u, v] = min(m[u, v], c)
    dist = shortest_path(csr_matrix(np.where(np.isinf(m), 0, m)), directed=True)
    for u, v, c in got:
        if u != v:
            assert dist[u, v] == c


def test_apsp_with_reserved_word_columns(spark, weighted):
    q = """WITH recursive sp (From, To, min() AS Cost) AS (SELECT Src, Dst, Cost FROM edge)
             UNION (SELECT sp.From, edge.Dst, sp.Cost + edge.Cost FROM sp, edge WHERE sp.To = edge.Src)
           SELECT From, To, Cost FROM sp"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.apsp_nonempty(WEIGHTED))


def test_sssp_with_double_costs_and_parallel_edges(spark, view):
    edges = [(0, 1, 10.5), (0, 1, 9.25), (0, 2, 1.0), (2, 1, 1.0), (2, 1, 2.0), (1, 3, 0.5)]
    view("edge", edges, "Src int, Dst int, Cost double")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0.0)
             UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
           SELECT Dst, Cost FROM path"""
    approx_rows(rows(recsql.sql(q, spark=spark)), sorted(oracles.dijkstra(edges, 0).items()))


# ----------------------------------------------------------------------------- connected components

def test_connected_components(spark, view):
    undirected = [(1, 2), (2, 3), (4, 5), (6, 7), (7, 8), (8, 6), (9, 10), (10, 3), (11, 11)]
    view("uedge", undirected, "A int, B int")
    q = """WITH sym AS (SELECT A AS Src, B AS Dst FROM uedge UNION SELECT B, A FROM uedge),
           recursive cc (Node, min() AS Comp) AS (SELECT Src, Src FROM sym)
             UNION (SELECT sym.Dst, cc.Comp FROM cc, sym WHERE cc.Node = sym.Src)
           SELECT Node, Comp FROM cc"""
    got = rows(recsql.sql(q, spark=spark))
    assert got == sorted(oracles.min_label_components(undirected))
    n = 12
    ncomp, labels = connected_components(
        csr_matrix((np.ones(len(undirected)), ([a for a, _ in undirected], [b for _, b in undirected])),
                   shape=(n, n)), directed=False)
    nodes = {x for e in undirected for x in e}
    assert len({c for _, c in got}) == len({labels[x] for x in nodes})


def test_connected_components_count_distinct(spark, view):
    undirected = [(1, 2), (2, 3), (4, 5), (6, 7)]
    view("uedge", undirected, "A int, B int")
    q = """WITH RECURSIVE sym AS (SELECT A AS Src, B AS Dst FROM uedge UNION SELECT B, A FROM uedge),
           cc (Node, min() AS Comp) AS (SELECT Src, Src FROM sym
             UNION SELECT sym.Dst, cc.Comp FROM cc JOIN sym ON cc.Node = sym.Src)
           SELECT count(DISTINCT Comp) AS n FROM cc"""
    assert rows(recsql.sql(q, spark=spark)) == [(3,)]


# ----------------------------------------------------------------------------- count paths

def test_count_paths_dag(spark, view):
    view("rc", DAG, "A int, B int")
    q = """WITH recursive paths (X, count() AS Cnt) AS (SELECT 1, 1)
             UNION (SELECT rc.B, paths.Cnt FROM paths, rc WHERE paths.X = rc.A)
           SELECT X, Cnt FROM paths"""
    got = rows(recsql.sql(q, spark=spark))
    expected = oracles.count_paths_dag(DAG, 1)
    assert got == sorted(expected.items())
    g = nx.DiGraph(DAG)
    assert dict(got)[7] == len(list(nx.all_simple_paths(g, 1, 7)))


def test_count_paths_sum_spelling(spark, view):
    view("edge", DAG, "Src int, Dst int")
    q = """WITH recursive cpaths (Dst, sum() AS Cnt) AS (SELECT 1, 1) UNION
             (SELECT edge.Dst, cpaths.Cnt FROM cpaths, edge WHERE cpaths.Dst = edge.Src)
           SELECT Dst, Cnt FROM cpaths"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.count_paths_dag(DAG, 1).items())


def test_count_paths_wide_lattice(spark, view):
    # a 6x6 grid DAG: paths from the corner are binomial coefficients
    from math import comb

    n = 6
    edges = [(i * n + j, i * n + j + 1) for i in range(n) for j in range(n - 1)]
    edges += [(i * n + j, (i + 1) * n + j) for i in range(n - 1) for j in range(n)]
    view("rc", edges, "A int, B int")
    q = """WITH recursive paths (X, mcount AS Cnt) AS (SELECT 0, 1)
             UNION (SELECT rc.B, paths.Cnt FROM paths, rc WHERE paths.X = rc.A)
           SELECT X, Cnt FROM paths"""
    got = dict(rows(recsql.sql(q, spark=spark)))
    assert got == {i * n + j: comb(i + j, i) for i in range(n) for j in range(n)}


# ----------------------------------------------------------------------------- bill of materials

ASSBL = [(10, 1), (10, 2), (11, 10), (11, 3), (12, 11), (12, 4), (13, 12), (13, 10)]
BASIC = [(1, 5), (2, 8), (3, 2), (4, 12)]


def test_bill_of_materials_max(spark, view):
    view("assbl", ASSBL, "Part int, Sub int")
    view("basic", BASIC, "Part int, Days int")
    q = """WITH recursive actualdays (Part, max() AS Mdays) AS (SELECT basic.Part, basic.Days FROM basic)
             UNION (SELECT assbl.Part, actualdays.Mdays FROM assbl, actualdays WHERE assbl.Sub = actualdays.Part)
           SELECT Part, Mdays FROM actualdays"""
    got = rows(recsql.sql(q, spark=spark))
    assert got == sorted(oracles.bom_max_days(ASSBL, BASIC).items())
    assert dict(got)[13] == 12


# ----------------------------------------------------------------------------- organisation size

REPORT = [(10, 6), (10, 9), (6, 1), (6, 2), (9, 7), (9, 8), (7, 3), (7, 4), (8, 5)]
ORG_EXPECTED = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 3), (7, 3), (8, 2), (9, 6), (10, 9)]


def test_organisation_size_count(spark, view):
    view("report", REPORT, "Mgr int, Emp int")
    q = """WITH recursive dept(Mgr, count() AS Cnt) AS (SELECT report.Emp, 1 FROM report)
             UNION (SELECT report.Mgr, dept.Cnt FROM dept, report WHERE dept.Mgr = report.Emp)
           SELECT Mgr, Cnt FROM dept"""
    got = rows(recsql.sql(q, spark=spark))
    assert got == ORG_EXPECTED  # DIALECT.md's table
    assert got == sorted(oracles.org_size(REPORT).items())


# ----------------------------------------------------------------------------- MLM bonus (sum)

SALES = [(1, 100.0), (2, 100.0), (3, 1000.0), (4, 1000.0), (5, 400.0), (6, 70.0), (7, 50.0),
         (8, 300.0), (8, 12.5), (9, 80.0)]
SPONSOR = [(10, 9), (10, 6), (9, 7), (9, 8), (7, 3), (7, 4), (6, 1), (6, 2), (8, 5)]


def test_mlm_bonus_sum_doubles(spark, view):
    view("sales", SALES, "M int, P double")
    view("sponsor", SPONSOR, "M1 int, M2 int")
    q = """WITH recursive bonus(M, sum() AS B) AS (SELECT M, P * 0.1 FROM sales)
             UNION (SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2)
           SELECT M, B FROM bonus"""
    got = rows(recsql.sql(q, spark=spark))
    expected = sorted(oracles.mlm_bonus(SALES, SPONSOR).items())
    approx_rows(got, expected, rel=1e-9)


def test_mlm_identical_base_rows_count_once(spark, view):
    sales = [(1, 100.0), (1, 100.0), (1, 50.0), (2, 10.0)]
    view("sales", sales, "M int, P double")
    view("sponsor", [(2, 1)], "M1 int, M2 int")
    q = """WITH recursive bonus(M, msum() AS B) AS (SELECT M, P * 0.1 FROM sales)
             UNION (SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2)
           SELECT M, B FROM bonus"""
    approx_rows(rows(recsql.sql(q, spark=spark)), [(1, 15.0), (2, 8.5)])


# ----------------------------------------------------------------------------- interval coalescing

INTERVALS = [(10, 20), (10, 22), (20, 30), (25, 40), (50, 60), (55, 58), (75, 80), (78, 90), (85, 100), (120, 121)]


def test_interval_coalescing_max_non_equi(spark, view):
    view("inter", INTERVALS, "S int, E int")
    q = """WITH lstart AS (SELECT a.S AS T FROM inter a, inter b WHERE a.S <= b.E
                               GROUP BY a.S HAVING a.S = min(b.S)),
           recursive coal (S, max() AS E) AS
             (SELECT lstart.T, inter.E FROM lstart, inter WHERE lstart.T = inter.S)
           UNION
             (SELECT coal.S, inter.E FROM coal, inter WHERE coal.S <= inter.S AND inter.S <= coal.E)
           SELECT S, E FROM coal"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.coalesce_intervals(INTERVALS))


def test_plain_cte_column_list_next_to_recursive_cte(spark, view):
    view("edge", [(1, 2), (2, 3)], "Src int, Dst int")
    q = """WITH v (T) AS (SELECT Src FROM edge),
           recursive r (X) AS (SELECT v.T FROM v) UNION (SELECT edge.Dst FROM r, edge WHERE r.X = edge.Src)
           SELECT X FROM r"""
    assert rows(recsql.sql(q, spark=spark)) == [(1,), (2,), (3,)]


# ----------------------------------------------------------------------------- mutual recursion

def test_mutual_recursion_even_odd(spark, view):
    edges = [(1, 2), (2, 3), (3, 4), (4, 1), (3, 5), (5, 6), (6, 7), (7, 5), (8, 9)]
    view("edge", edges, "Src int, Dst int")
    q = """WITH recursive even (X) AS (SELECT 1)
             UNION (SELECT edge.Dst FROM odd, edge WHERE odd.X = edge.Src),
           odd (X) AS (SELECT edge.Dst FROM even, edge WHERE even.X = edge.Src)
           SELECT 'even' AS kind, X FROM even UNION ALL SELECT 'odd', X FROM odd"""
    got = rows(recsql.sql(q, spark=spark))
    ev, od = oracles.parity_reach(edges, 1)
    assert got == sorted([("even", x) for x in ev] + [("odd", x) for x in od])


def test_mutual_recursion_with_aggregates(spark, view):
    # shortest even-length and odd-length walk costs from node 0
    edges = [(0, 1, 1), (1, 2, 1), (2, 0, 1), (1, 3, 5), (3, 4, 1), (2, 4, 1)]
    view("edge", edges, "Src int, Dst int, Cost int")
    q = """WITH recursive ev (N, min() AS C) AS (SELECT 0, 0)
             UNION (SELECT edge.Dst, od.C + edge.Cost FROM od, edge WHERE od.N = edge.Src),
           od (N, min() AS C) AS (SELECT edge.Dst, ev.C + edge.Cost FROM ev, edge WHERE ev.N = edge.Src)
           SELECT 'e', N, C FROM ev UNION ALL SELECT 'o', N, C FROM od"""
    got = rows(recsql.sql(q, spark=spark))
    # oracle: Dijkstra on the (node, parity) product graph
    product = [((u, p), (v, 1 - p), c) for u, v, c in edges for p in (0, 1)]
    dist = oracles.dijkstra(product, (0, 0))
    expected = sorted(("e" if p == 0 else "o", n, d) for (n, p), d in dist.items())
    assert got == expected


# ----------------------------------------------------------------------------- stratified negation

def test_stratified_negation_not_exists(spark, view):
    view("arc", CYCLIC, "Src int, Dst int")
    view("nodes", [(n,) for n in range(1, 13)], "X int")
    q = """WITH RECURSIVE reach (X) AS (SELECT 4 UNION SELECT arc.Dst FROM reach JOIN arc ON reach.X = arc.Src),
           unreached (X) AS (SELECT n.X FROM nodes n WHERE NOT EXISTS (SELECT 1 FROM reach r WHERE r.X = n.X))
           SELECT X FROM unreached"""
    expected = set(range(1, 13)) - oracles.reachable(CYCLIC, 4)
    assert {r[0] for r in recsql.sql(q, spark=spark).collect()} == expected


def test_negation_over_completed_cte_inside_recursion(spark, view):
    # walk from 1 but never enter a node reachable from 7 (a completed, lower stratum)
    edges = [(1, 2), (2, 3), (3, 4), (7, 8), (8, 3), (2, 5), (5, 6)]
    view("arc", edges, "Src int, Dst int")
    q = """WITH RECURSIVE blocked (X) AS (SELECT 7 UNION SELECT arc.Dst FROM blocked, arc WHERE blocked.X = arc.Src),
           walk (X) AS (SELECT 1 UNION SELECT arc.Dst FROM walk, arc WHERE walk.X = arc.Src
                        AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.X = arc.Dst))
           SELECT X FROM walk"""
    assert {r[0] for r in recsql.sql(q, spark=spark).collect()} == {1, 2, 5, 6}


# ----------------------------------------------------------------------------- misc language

def test_several_aggregates_in_one_head(spark, weighted):
    q = """WITH recursive r (Dst, min() AS Lo, max() AS Hops) AS (SELECT 1, 0, 0)
             UNION (SELECT edge.Dst, r.Lo + edge.Cost, least(r.Hops + 1, 4) FROM r, edge WHERE r.Dst = edge.Src)
           SELECT Dst, Lo, Hops FROM r"""
    got = rows(recsql.sql(q, spark=spark))
    dist = oracles.dijkstra(WEIGHTED, 1)
    # the longest walk (capped at 4 hops) from 1 to each node
    succ = oracles.successors(WEIGHTED)
    hops = {1: 0}
    frontier = {1}
    for k in range(1, 5):
        frontier = {v for u in frontier for v in succ[u]}
        for v in frontier:
            hops[v] = k
    assert got == sorted((n, dist[n], hops[n]) for n in dist)


def test_plain_cte_and_final_query_joins(spark, weighted):
    q = """WITH cheap AS (SELECT Src, Dst, Cost FROM edge WHERE Cost < 12),
           recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT cheap.Dst, path.Cost + cheap.Cost FROM path, cheap WHERE path.Dst = cheap.Src)
           SELECT p.Dst, p.Cost, count(e.Src) AS outdeg
           FROM path p LEFT JOIN edge e ON e.Src = p.Dst GROUP BY p.Dst, p.Cost"""
    cheap = [e for e in WEIGHTED if e[2] < 12]
    dist = oracles.dijkstra(cheap, 1)
    outdeg = {n: sum(1 for e in WEIGHTED if e[0] == n) for n in dist}
    assert rows(recsql.sql(q, spark=spark)) == sorted((n, d, outdeg[n]) for n, d in dist.items())


def test_case_expression_and_cast_in_recursive_branch(spark, weighted):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, CAST(0 AS DOUBLE))
             UNION (SELECT edge.Dst, path.Cost + CASE WHEN edge.Cost > 10 THEN 10.0 ELSE CAST(edge.Cost AS DOUBLE) END
                    FROM path, edge WHERE path.Dst = edge.Src)
           SELECT Dst, Cost FROM path"""
    capped = [(u, v, min(c, 10)) for u, v, c in WEIGHTED]
    approx_rows(rows(recsql.sql(q, spark=spark)), sorted((n, float(d)) for n, d in oracles.dijkstra(capped, 1).items()))


def test_no_recursion_passes_to_spark(spark, weighted):
    q = "WITH c AS (SELECT Src, count(*) AS n FROM edge GROUP BY Src) SELECT * FROM c WHERE n > 1"
    from collections import Counter

    counts = Counter(e[0] for e in WEIGHTED)
    r = recsql.run(q, spark=spark)
    assert r.stats == []
    assert rows(r.df) == sorted((k, v) for k, v in counts.items() if v > 1)
