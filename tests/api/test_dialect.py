"""Every worked example and stated rule of DIALECT.md (/work/shared/DIALECT.md), with its answer."""

from __future__ import annotations

from collections import defaultdict

import oracles
import pytest
from conftest import approx_rows, rows

import recsql

EDGE = [(1, 2, 4), (1, 3, 1), (3, 2, 2), (2, 4, 5), (3, 4, 8), (4, 5, 3), (5, 1, 1), (6, 7, 1)]


@pytest.fixture
def edge(view):
    return view("edge", EDGE, "Src int, Dst int, Cost int")


def sssp(source=1):
    return sorted(oracles.dijkstra(EDGE, source).items())


def test_section1_rasql_form(spark, edge):
    q = """WITH recursive path (Dst, min() AS Cost) AS
        (SELECT 1, 0)
      UNION
        (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    assert rows(recsql.sql(q, spark=spark)) == sssp() == [(1, 0), (2, 3), (3, 1), (4, 8), (5, 11)]


def test_section1_standard_form(spark, edge):
    q = """WITH RECURSIVE path (Dst, min() AS Cost) AS (
      SELECT 1, 0
      UNION
      SELECT e.Dst, p.Cost + e.Cost FROM path p JOIN edge e ON p.Dst = e.Src
    )
    SELECT * FROM path ORDER BY Cost LIMIT 10"""
    got = [tuple(r) for r in recsql.sql(q, spark=spark).collect()]
    assert got == sorted(sssp(), key=lambda r: r[1])


def test_section1_recursive_keyword_optional_and_case_insensitive(spark, edge):
    q = """WITH path (Dst, MIN() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    assert rows(recsql.sql(q, spark=spark)) == sssp()


def test_section1_reserved_words_as_column_names(spark, view):
    view("warc", [(s, d, c) for s, d, c in EDGE], "From int, To int, Cost int")
    q = """WITH recursive sp (To, min() AS Cost) AS (SELECT 1, 0)
        UNION (SELECT warc.To, sp.Cost + warc.Cost FROM sp, warc WHERE sp.To = warc.From)
      SELECT To, Cost FROM sp"""
    assert rows(recsql.sql(q, spark=spark)) == sssp()


def test_section1_reserved_words_unqualified(spark, view):
    view("warc", [(s, d, c) for s, d, c in EDGE], "From int, To int, Cost int")
    q = """WITH recursive sp (From, To, min() AS Cost) AS (SELECT From, To, Cost FROM warc WHERE From = 1)
        UNION (SELECT 1, 1, 0)
      SELECT From, To, Cost FROM sp WHERE To > 1"""
    assert rows(recsql.sql(q, spark=spark)) == [(1, 2, 4), (1, 3, 1)]


def test_section2_count_paths(spark, view):
    rc = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (2, 5), (5, 6), (4, 6)]
    view("rc", rc, "A int, B int")
    q = """WITH recursive paths (X, count() AS Cnt) AS (SELECT 1, 1)
      UNION (SELECT rc.B, paths.Cnt FROM paths, rc WHERE paths.X = rc.A)
    SELECT X, Cnt FROM paths"""
    assert rows(recsql.sql(q, spark=spark)) == sorted(oracles.count_paths_dag(rc, 1).items())


def test_section2_organisation_size(spark, view):
    view("report", [(10, 6), (10, 9), (6, 1), (6, 2), (9, 7), (9, 8), (7, 3), (7, 4), (8, 5)],
         "Mgr int, Emp int")
    q = """WITH recursive dept(Mgr, count() AS Cnt) AS (SELECT report.Emp, 1 FROM report)
      UNION (SELECT report.Mgr, dept.Cnt FROM dept, report WHERE dept.Mgr = report.Emp)
    SELECT Mgr, Cnt FROM dept"""
    assert rows(recsql.sql(q, spark=spark)) == [
        (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 3), (7, 3), (8, 2), (9, 6), (10, 9)]


def test_section2_multi_level_marketing(spark, view):
    sales = [(1, 100.0), (2, 100.0), (3, 1000.0), (4, 1000.0), (5, 400.0), (6, 70.0), (9, 80.0)]
    sponsor = [(10, 9), (10, 6), (9, 7), (9, 8), (7, 3), (7, 4), (6, 1), (6, 2), (8, 5)]
    view("sales", sales, "M int, P double")
    view("sponsor", sponsor, "M1 int, M2 int")
    q = """WITH recursive bonus(M, sum() AS B) AS (SELECT M, P * 0.1 FROM sales)
      UNION (SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2)
    SELECT M, B FROM bonus"""
    approx_rows(rows(recsql.sql(q, spark=spark)), sorted(oracles.mlm_bonus(sales, sponsor).items()))


def test_section2_base_contributors_distinct_rows_add_up(spark, view):
    # identical base rows count once; different rows of one group add up
    view("t", [(1, 5), (1, 5), (1, 7), (2, 1)], "K int, V int")
    q = """WITH recursive s (K, sum() AS V) AS (SELECT K, V FROM t)
      UNION (SELECT s.K, s.V FROM s WHERE s.K < 0)
    SELECT K, V FROM s"""
    assert rows(recsql.sql(q, spark=spark)) == [(1, 12), (2, 1)]


def test_section2_contributor_includes_join_columns_of_two_other_tables(spark, view):
    # routes: two airlines flying 1->2 are two distinct derivations of the paths to 2
    flights = [(1, 2, "a"), (1, 2, "b"), (2, 3, "a"), (1, 3, "c"), (3, 4, "a"), (3, 4, "b")]
    view("flight", flights, "A int, B int, Carrier string")
    view("carrier", [("a",), ("b",), ("c",)], "Id string")
    q = """WITH recursive routes (X, count() AS Cnt) AS (SELECT 1, 1)
      UNION (SELECT flight.B, routes.Cnt FROM routes, flight, carrier
             WHERE routes.X = flight.A AND flight.Carrier = carrier.Id)
    SELECT X, Cnt FROM routes"""
    # oracle: count paths in the multigraph (each flight row is its own edge)
    succ = defaultdict(list)
    for a, b, _ in flights:
        succ[a].append(b)
    count = defaultdict(int, {1: 1})
    for node in (1, 2, 3):  # topological order
        for nxt in succ[node]:
            count[nxt] += count[node]
    assert rows(recsql.sql(q, spark=spark)) == sorted(count.items()) == [(1, 1), (2, 2), (3, 3), (4, 6)]


def test_section2_min_and_max_over_every_derivation(spark, edge):
    q = """WITH recursive r (Dst, min() AS Lo, max() AS Hi) AS (SELECT 1, 0, 0)
      UNION (SELECT edge.Dst, r.Lo + edge.Cost, least(r.Hi + edge.Cost, 20) FROM r, edge WHERE r.Dst = edge.Src)
    SELECT Dst, Lo, Hi FROM r"""
    # Hi: longest walk capped at 20 (walks may cycle; the cap makes it finite)
    hi = {1: 0}
    changed = True
    while changed:
        changed = False
        for s, d, c in EDGE:
            if s in hi:
                v = min(hi[s] + c, 20)
                if v > hi.get(d, -1):
                    hi[d] = v
                    changed = True
    lo = dict(sssp())
    assert rows(recsql.sql(q, spark=spark)) == sorted((n, lo[n], hi[n]) for n in lo)


def test_section2_union_all_bag_semantics(spark, view):
    # each step works on the previous step's rows; duplicates are kept
    view("e", [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5)], "A int, B int")
    q = """WITH RECURSIVE w (N, Len) AS (SELECT 1, 0 UNION ALL
             SELECT e.B, w.Len + 1 FROM w JOIN e ON w.N = e.A)
           SELECT N, Len FROM w"""
    # every walk from 1, once per walk
    expected = [(1, 0), (2, 1), (3, 1), (4, 2), (4, 2), (5, 3), (5, 3)]
    assert rows(recsql.sql(q, spark=spark)) == expected


def test_section2_union_all_recursion_without_column_list(spark):
    q = """WITH RECURSIVE c AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM c WHERE n < 5) SELECT n FROM c"""
    assert rows(recsql.sql(q, spark=spark)) == [(i,) for i in range(1, 6)]


def test_section2_several_ctes_any_order_non_recursive_mixed(spark, edge):
    q = """WITH RECURSIVE far AS (SELECT Dst FROM path WHERE Cost > 5),
           path (Dst, min() AS Cost) AS (SELECT 1, 0
             UNION SELECT e.Dst, p.Cost + e.Cost FROM path p JOIN cheap e ON p.Dst = e.Src),
           cheap AS (SELECT * FROM edge WHERE Cost < 6)
           SELECT Dst FROM far"""
    cheap = [e for e in EDGE if e[2] < 6]
    dist = oracles.dijkstra(cheap, 1)
    assert {r[0] for r in recsql.sql(q, spark=spark).collect()} == {n for n, d in dist.items() if d > 5}


def test_section2_final_query_window_and_subquery(spark, edge):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, rank() OVER (ORDER BY Cost) AS rk FROM path
    WHERE Cost < (SELECT max(Cost) FROM path)"""
    dist = dict(sssp())
    ordered = sorted(v for k, v in dist.items() if v < max(dist.values()))
    expected = sorted((k, ordered.index(v) + 1) for k, v in dist.items() if v < max(dist.values()))
    assert rows(recsql.sql(q, spark=spark)) == expected


def test_section2_head_aggregate_without_recursion(spark, edge):
    q = "WITH m (Src, max() AS C) AS (SELECT Src, Cost FROM edge) SELECT Src, C FROM m"
    best = defaultdict(int)
    for s, _, c in EDGE:
        best[s] = max(best[s], c)
    assert rows(recsql.sql(q, spark=spark)) == sorted(best.items())


def test_section2_integer_overflow_is_an_error(spark, view):
    view("e", [(1, 2), (2, 1)], "A int, B int")
    q = """WITH recursive g (N, max() AS V) AS (SELECT 1, 1)
      UNION (SELECT e.B, g.V * 1000 FROM g, e WHERE g.N = e.A)
    SELECT N, V FROM g"""
    with pytest.raises(recsql.RecSQLError) as info:
        recsql.sql(q, spark=spark, conf={"spark.recsql.maxIterations": 50}).collect()
    text = str(info.value)
    assert "g" in text and "V" in text
    assert "Py4J" not in text and "py4j" not in text
