"""The endgame: the fixpoint's tail finishes on the driver (DuckDB) with the Spark states' exact
semantics. Every query runs with the endgame forced on and is checked against an independent
oracle (networkx, numpy, plain Python); the stats must show the tail ran on the driver."""

from __future__ import annotations

from collections import Counter, defaultdict

import networkx as nx
import numpy as np
import pytest
from conftest import approx_rows, rows

import recsql
from recsql.errors import RecSQLError
from recsql.executor.endgame import database
from recsql.executor.endgame.decide import held_bytes

# the whole tail on the driver
ON = {"spark.recsql.endgame.enabled": "true", "spark.recsql.endgame.maxDeltaRows": 1000000}
OFF = {"spark.recsql.endgame.enabled": "false"}


def limit(rows: int) -> dict:
    """The endgame on, with the driver taking only deltas of at most `rows`."""
    return {"spark.recsql.endgame.enabled": "true", "spark.recsql.endgame.maxDeltaRows": rows}

CYCLIC = [(1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 4), (7, 8), (2, 9), (9, 10)]
WEIGHTED = [
    (1, 2, 7), (1, 3, 9), (1, 6, 14), (2, 3, 10), (2, 4, 15), (3, 4, 11), (3, 6, 2),
    (4, 5, 6), (5, 6, 9), (6, 5, 9), (6, 1, 3), (7, 8, 1), (5, 7, 20),
]
DAG = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (4, 6), (5, 7), (6, 7), (1, 7), (2, 5), (8, 9),
       (7, 10), (10, 11), (11, 12)]


def places(stats) -> list[tuple[int, str]]:
    return sorted({(s.iteration, s.ran_on) for s in stats})


def assert_driver_tail(result, ctes: int = 1, spark_recursive: bool = False) -> None:
    """Iterations are numbered 0..n without gaps or repeats (one stat per CTE each); once one
    ran on the driver (the base step, when it all fits from the start), all later ones did; the
    tail did; and, if asked, at least one recursive iteration ran on Spark before the switch."""
    stats = result.stats
    counts = Counter(s.iteration for s in stats)
    assert sorted(counts) == list(range(len(counts))), counts
    assert set(counts.values()) == {ctes}, counts
    where = [ran_on for _, ran_on in places(stats)]
    # the base step too runs on the driver when the whole fixpoint fits from the start
    assert where[-1] == "driver", places(stats)
    first = where.index("driver")
    assert all(w == "driver" for w in where[first:]), places(stats)
    assert all(s.join_strategy == "driver" for s in stats if s.ran_on == "driver")
    assert stats[-1].delta_rows == 0
    if spark_recursive:
        assert first >= 2, places(stats)


# ----------------------------------------------------------------------------- set semantics

def reachable(edges, start) -> set:
    succ = defaultdict(set)
    for u, v in edges:
        succ[u].add(v)
    seen, stack = {start}, [start]
    while stack:
        for nxt in succ[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def test_reachability_set(spark, view):
    view("arc", CYCLIC, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 1)
             UNION (SELECT arc.Dst FROM reach, arc WHERE reach.X = arc.Src)
           SELECT X FROM reach"""
    result = recsql.run(q, spark=spark, conf=ON)
    assert {r[0] for r in result.df.collect()} == reachable(CYCLIC, 1)
    assert_driver_tail(result)


def test_stats_time_the_write_back_and_the_base_copy(spark, view):
    """The driver's last iteration reports putting its states back on Spark (write_seconds); a
    Spark iteration reports making the partitioned base copy it joins (base_seconds), only the
    first that joins it (the copy is made once per statement: the view is never kept)."""
    view("arc", CYCLIC, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 1)
             UNION (SELECT arc.Dst FROM reach, arc WHERE reach.X = arc.Src)
           SELECT X FROM reach"""
    on = recsql.run(q, spark=spark, conf=ON).stats
    assert [s.write_seconds > 0 for s in on] == [False] * (len(on) - 1) + [True]
    off = recsql.run(q, spark=spark, conf=OFF).stats
    assert [s.base_seconds > 0 for s in off] == [False, True] + [False] * (len(off) - 2)
    assert all(s.driver_seconds >= s.base_seconds for s in off)
    assert all(s.write_seconds == 0 for s in off)


def test_a_large_answer_comes_back_in_the_statements_partitions(spark, view):
    """The driver hands its answer to Spark in at most the statement's partitions (local[2]: 2),
    not one per 10,000 rows (Spark's Arrow batch), so the answer's jobs run a task per core."""
    leaves = 25_000
    star = [(0, i) for i in range(1, leaves + 1)]
    view("star", [*star, *[(d, s) for s, d in star]], "Src int, Dst int")
    q = """WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM star)
             UNION (SELECT star.Dst, cc.C FROM cc, star WHERE cc.X = star.Src)
           SELECT X, C FROM cc"""
    result = recsql.run(q, spark=spark, conf=ON)
    assert all(s.ran_on == "driver" for s in result.stats)
    # every node is in the component of 0, its least node (networkx agrees)
    components = list(nx.connected_components(nx.Graph(star)))
    assert len(components) == 1 and min(components[0]) == 0
    assert {tuple(r) for r in result.df.collect()} == {(v, 0) for v in components[0]}
    assert result.df.rdd.getNumPartitions() <= 2


def test_reachability_switches_mid_run(spark, view):
    # a fan-out then a chain: the delta grows (Spark), then shrinks (driver)
    edges = [(0, i) for i in range(1, 6)] + [(i, 6) for i in range(1, 6)] + [(i, i + 1) for i in range(6, 14)]
    view("arc", edges, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 0)
             UNION (SELECT arc.Dst FROM reach, arc WHERE reach.X = arc.Src)
           SELECT X FROM reach"""
    result = recsql.run(q, spark=spark, conf=limit(5))
    assert {r[0] for r in result.df.collect()} == reachable(edges, 0)
    assert_driver_tail(result, spark_recursive=True)


def test_transitive_closure_non_linear(spark, view):
    view("arc", CYCLIC, "Src int, Dst int")
    q = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM arc)
             UNION (SELECT a.X, b.Y FROM tc a, tc b WHERE a.Y = b.X)
           SELECT X, Y FROM tc"""
    result = recsql.run(q, spark=spark, conf=ON)
    expected = set(nx.transitive_closure(nx.DiGraph(CYCLIC), reflexive=False).edges())
    assert set(rows(result.df)) == expected and len(rows(result.df)) == len(expected)
    assert_driver_tail(result)


# ----------------------------------------------------------------------------- min / max

def test_sssp_min(spark, view):
    view("edge", WEIGHTED, "Src int, Dst int, Cost int")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
           SELECT Dst, Cost FROM path"""
    result = recsql.run(q, spark=spark, conf=ON)
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert rows(result.df) == sorted(nx.single_source_dijkstra_path_length(g, 1).items())
    assert_driver_tail(result)


def test_longest_path_max(spark, view):
    view("arc", DAG, "Src int, Dst int")
    q = """WITH recursive lp (X, max() AS L) AS (SELECT 1, 0)
             UNION (SELECT arc.Dst, lp.L + 1 FROM lp, arc WHERE lp.X = arc.Src)
           SELECT X, L FROM lp"""
    result = recsql.run(q, spark=spark, conf=ON)
    g = nx.DiGraph(DAG)
    expected = {1: 0}
    for node in nx.topological_sort(g):
        if node in expected:
            for nxt in g.successors(node):
                expected[nxt] = max(expected.get(nxt, -1), expected[node] + 1)
    assert rows(result.df) == sorted(expected.items())
    assert_driver_tail(result)


def test_integral_cast_truncates_like_spark(spark, view):
    # Spark's CAST(10.5 AS INT) is 10 (truncation); DuckDB's alone would round to 11
    view("arc", [(i, i + 1) for i in range(1, 9)], "Src int, Dst int")
    q = """WITH recursive h (X, max() AS V) AS (SELECT 1, 7)
             UNION (SELECT arc.Dst, CAST(h.V * 1.5 AS INT) FROM h, arc WHERE h.X = arc.Src)
           SELECT X, V FROM h"""
    result = recsql.run(q, spark=spark, conf=ON)
    expected, v = [(1, 7)], 7
    for x in range(2, 10):
        v = int(v * 1.5)
        expected.append((x, v))
    assert rows(result.df) == expected
    assert_driver_tail(result)


# ----------------------------------------------------------------------------- sum / count

def count_paths(edges, source) -> dict:
    g = nx.DiGraph(edges)
    counts = {source: 1}
    for node in nx.topological_sort(g):
        for nxt in g.successors(node):
            if node in counts:
                counts[nxt] = counts.get(nxt, 0) + counts[node]
    return counts


COUNT_PATHS = """WITH recursive paths (X, count() AS Cnt) AS (SELECT 1, 1)
                   UNION (SELECT arc.Dst, paths.Cnt FROM paths, arc WHERE paths.X = arc.Src)
                 SELECT X, Cnt FROM paths"""


def test_count_paths(spark, view):
    view("arc", DAG, "Src int, Dst int")
    result = recsql.run(COUNT_PATHS, spark=spark, conf=ON)
    assert rows(result.df) == sorted(count_paths(DAG, 1).items())
    assert result.df.schema["Cnt"].dataType.simpleString() == "bigint"
    assert_driver_tail(result)


def test_count_paths_switch_mid_run(spark, view):
    # Spark's recursive contributors are taken over by the driver and must be recognised
    # there, or a contributor met again would be counted twice
    edges = [(1, i) for i in range(2, 6)] + [(i, j) for i in range(2, 6) for j in range(6, 9)]
    edges += [(j, 9) for j in range(6, 9)] + [(i, i + 1) for i in range(9, 15)] + [(2, 10), (9, 12)]
    view("arc", edges, "Src int, Dst int")
    result = recsql.run(COUNT_PATHS, spark=spark, conf=limit(3))
    assert rows(result.df) == sorted(count_paths(edges, 1).items())
    assert_driver_tail(result, spark_recursive=True)


MLM_SALES = [(1, 100.0), (2, 200.0), (3, 1000.0), (4, 50.0), (5, 400.0), (6, 70.0), (6, 12.5)]
MLM_SPONSOR = [(1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (1, 6)]  # M1 sponsors M2; 1-2-3 cycle
MLM = """WITH recursive bonus (M, sum() AS B) AS (SELECT M, P * 0.1 FROM sales)
           UNION (SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2)
         SELECT M, B FROM bonus"""


def mlm_oracle(sales, sponsor) -> list[tuple]:
    """bonus = own + 0.5 * A @ bonus, solved exactly: (I - 0.5 A) bonus = own."""
    members = sorted({m for m, _ in sales} | {m for e in sponsor for m in e})
    index = {m: i for i, m in enumerate(members)}
    own = np.zeros(len(members))
    for m, p in set(sales):
        own[index[m]] += p * 0.1
    a = np.zeros((len(members), len(members)))
    for m1, m2 in set(sponsor):
        a[index[m1], index[m2]] = 1.0
    bonus = np.linalg.solve(np.eye(len(members)) - 0.5 * a, own)
    return [(m, float(bonus[index[m]])) for m in members]


@pytest.mark.parametrize("conf", [ON, limit(3)], ids=["start", "switch"])
def test_mlm_sum_doubles_with_cycle(spark, view, conf):
    view("sales", MLM_SALES, "M int, P double")
    view("sponsor", MLM_SPONSOR, "M1 int, M2 int")
    result = recsql.run(MLM, spark=spark, conf=conf)
    approx_rows(rows(result.df), mlm_oracle(MLM_SALES, MLM_SPONSOR), rel=1e-7)
    assert_driver_tail(result, spark_recursive=conf is not ON)
    # the tolerance ended the cycle: far fewer iterations than the maxIterations bound
    assert max(s.iteration for s in result.stats) < 100


# ----------------------------------------------------------------------------- UNION ALL

def test_union_all_bag(spark, view):
    view("arc", DAG, "Src int, Dst int")
    q = """WITH RECURSIVE walk (X, D) AS (
             SELECT 1, 0
             UNION ALL
             SELECT arc.Dst, walk.D + 1 FROM walk JOIN arc ON walk.X = arc.Src)
           SELECT X, D FROM walk"""
    result = recsql.run(q, spark=spark, conf=ON)
    succ = defaultdict(list)
    for u, v in DAG:
        succ[u].append(v)
    expected, frontier = [], [(1, 0)]
    while frontier:  # every walk from 1, by its end node and length (duplicates kept)
        expected += frontier
        frontier = [(v, d + 1) for x, d in frontier for v in succ[x]]
    assert rows(result.df) == sorted(expected)
    assert_driver_tail(result)
    assert result.stats[-2].total_rows == len(expected)


# ----------------------------------------------------------------------------- mutual recursion

def test_mutual_recursion_even_odd(spark, view):
    edges = [(1, 2), (2, 3), (3, 4), (4, 1), (3, 5), (5, 6), (6, 7), (7, 5), (8, 9)]
    view("edge", edges, "Src int, Dst int")
    q = """WITH recursive even (X) AS (SELECT 1)
             UNION (SELECT edge.Dst FROM odd, edge WHERE odd.X = edge.Src),
           odd (X) AS (SELECT edge.Dst FROM even, edge WHERE even.X = edge.Src)
           SELECT 'even' AS kind, X FROM even UNION ALL SELECT 'odd', X FROM odd"""
    result = recsql.run(q, spark=spark, conf=ON)
    product = nx.DiGraph([((u, p), (v, 1 - p)) for u, v in edges for p in (0, 1)])
    reached = nx.descendants(product, (1, 0)) | {(1, 0)}
    expected = sorted(("even" if p == 0 else "odd", x) for x, p in reached)
    assert rows(result.df) == expected
    assert_driver_tail(result, ctes=2)


def test_mutual_recursion_min(spark, view):
    edges = [(0, 1, 1), (1, 2, 1), (2, 0, 1), (1, 3, 5), (3, 4, 1), (2, 4, 1)]
    view("edge", edges, "Src int, Dst int, Cost int")
    q = """WITH recursive ev (N, min() AS C) AS (SELECT 0, 0)
             UNION (SELECT edge.Dst, od.C + edge.Cost FROM od, edge WHERE od.N = edge.Src),
           od (N, min() AS C) AS (SELECT edge.Dst, ev.C + edge.Cost FROM ev, edge WHERE ev.N = edge.Src)
           SELECT 'e', N, C FROM ev UNION ALL SELECT 'o', N, C FROM od"""
    result = recsql.run(q, spark=spark, conf=ON)
    g = nx.DiGraph()
    g.add_weighted_edges_from([((u, p), (v, 1 - p), c) for u, v, c in edges for p in (0, 1)])
    dist = nx.single_source_dijkstra_path_length(g, (0, 0))
    assert rows(result.df) == sorted(("e" if p == 0 else "o", n, d) for (n, p), d in dist.items())
    assert_driver_tail(result, ctes=2)


# ----------------------------------------------------------------------------- when it applies

def test_large_delta_stays_on_spark(spark, view):
    # a binary tree: the delta doubles every level; with a budget of 4 rows, no iteration that
    # follows a delta above 4 runs on the driver, and the final result is unaffected
    edges = [(i, 2 * i) for i in range(1, 32)] + [(i, 2 * i + 1) for i in range(1, 32)]
    view("arc", edges, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 1)
             UNION (SELECT arc.Dst FROM reach, arc WHERE reach.X = arc.Src)
           SELECT X FROM reach"""
    result = recsql.run(q, spark=spark, conf=limit(4))
    assert {r[0] for r in result.df.collect()} == reachable(edges, 1)
    stats = sorted(result.stats, key=lambda s: s.iteration)
    assert [s.iteration for s in stats] == list(range(len(stats)))
    assert all(s.ran_on == "spark" for s in stats)  # the delta only grows, then stops


def test_growth_on_the_driver_hands_back_to_spark(spark, view):
    # a chain (delta 1, not growing: the driver takes over) that opens into a binary tree (the
    # delta outgrows the limit on the driver): Spark continues from the driver's last iteration,
    # whose work is kept; numbering and result are as if one engine had run them all
    chain = [(i, i + 1) for i in range(1, 4)]
    tree = [(i, 2 * i) for i in range(4, 64)] + [(i, 2 * i + 1) for i in range(4, 64)]
    edges = chain + tree
    view("arc", edges, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 1)
             UNION (SELECT arc.Dst FROM reach, arc WHERE reach.X = arc.Src)
           SELECT X FROM reach"""
    conf = limit(4)
    result = recsql.run(q, spark=spark, conf=conf)
    assert {r[0] for r in result.df.collect()} == reachable(edges, 1)
    assert_handed_back(result)
    # the driver stopped at the first delta over the limit, which Spark joined next
    driver = [s for s in result.stats if s.ran_on == "driver"]
    assert driver[-1].delta_rows > 4 and all(s.delta_rows <= 4 for s in driver[:-1])


def assert_handed_back(result, ctes: int = 1) -> None:
    """Iterations numbered 0..n without gaps or repeats; a run of driver iterations followed by
    Spark ones to the end (the driver handed its states back and no work was redone)."""
    stats = result.stats
    counts = Counter(s.iteration for s in stats)
    assert sorted(counts) == list(range(len(counts))) and set(counts.values()) == {ctes}, counts
    where = [ran_on for _, ran_on in places(stats)]
    first = where.index("driver")
    last = len(where) - 1 - where[::-1].index("driver")
    assert set(where[first:last + 1]) == {"driver"}, places(stats)
    assert last < len(where) - 1 and set(where[last + 1:]) == {"spark"}, places(stats)
    assert stats[-1].delta_rows == 0


def budget_for(state_rows: int, state_row_bytes: int, relation_rows: int, relation_row_bytes: int) -> str:
    """A driverMemory that holds the relations and a state of at most `state_rows` rows."""
    return str(held_bytes(state_rows * state_row_bytes, relation_rows * relation_row_bytes))


def test_a_small_driver_memory_hands_a_shortest_path_back_to_spark(spark, view):
    # the whole fixpoint starts on the driver; the state (Dst int, Cost int) outgrows a budget
    # of 4 rows, and Spark finishes from there with the driver's min-merged costs
    view("arc", WEIGHTED, "Src int, Dst int, Cost int")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT arc.Dst, path.Cost + arc.Cost FROM path, arc WHERE path.Dst = arc.Src)
           SELECT Dst, Cost FROM path"""
    conf = {"spark.recsql.endgame.driverMemory": budget_for(4, 8, len(WEIGHTED), 12)}
    result = recsql.run(q, spark=spark, conf=conf)
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert rows(result.df) == sorted(nx.single_source_dijkstra_path_length(g, 1).items())
    assert_handed_back(result)
    assert places(result.stats)[0] == (0, "driver")


def test_a_small_driver_memory_hands_a_closure_back_to_spark(spark, view):
    # 12 edges fit, the closure (78 pairs) does not: the driver hands back after the base step
    # and the first iteration (23 pairs), Spark goes on from there
    chain = [(i, i + 1) for i in range(12)]
    view("arc", chain, "Src int, Dst int")
    q = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM arc)
             UNION (SELECT tc.X, arc.Dst FROM tc, arc WHERE tc.Y = arc.Src)
           SELECT X, Y FROM tc"""
    result = recsql.run(q, spark=spark, conf={"spark.recsql.endgame.driverMemory": budget_for(20, 8, 12, 8)})
    assert rows(result.df) == sorted((i, j) for i in range(12) for j in range(i + 1, 13))
    assert_handed_back(result)
    assert [s.ran_on for s in sorted(result.stats, key=lambda s: s.iteration)][:2] == ["driver", "driver"]


def test_a_small_driver_memory_hands_path_counts_back_to_spark(spark, view):
    # a count() head: the base step on Spark, then the driver (its contributors pulled), which
    # hands the contributors back with the state once it holds more than 3 rows
    view("arc", DAG, "Src int, Dst int")
    conf = {"spark.recsql.endgame.driverMemory": budget_for(3, 12, len(DAG), 8)}
    result = recsql.run(COUNT_PATHS, spark=spark, conf=conf)
    assert rows(result.df) == sorted(count_paths(DAG, 1).items())
    assert_handed_back(result)


def test_disabled_runs_on_spark(spark, view):
    view("arc", CYCLIC, "Src int, Dst int")
    q = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM arc)
             UNION (SELECT tc.X, arc.Dst FROM tc, arc WHERE tc.Y = arc.Src)
           SELECT X, Y FROM tc"""
    result = recsql.run(q, spark=spark, conf=OFF)
    assert all(s.ran_on == "spark" for s in result.stats)
    assert set(rows(result.df)) == set(nx.transitive_closure(nx.DiGraph(CYCLIC), reflexive=False).edges())


# ----------------------------------------------------------------------------- fallback

def test_untranslatable_branch_falls_back_to_spark(spark, view):
    # a Spark UDF DuckDB does not have: the driver declines, Spark finishes, same result
    spark.udf.register("rq_test_next", lambda x: x + 1, "int")
    view("arc", CYCLIC, "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 1)
             UNION (SELECT arc.Dst FROM reach, arc WHERE rq_test_next(reach.X) = arc.Src + 1)
           SELECT X FROM reach"""
    result = recsql.run(q, spark=spark, conf=ON)
    assert {r[0] for r in result.df.collect()} == reachable(CYCLIC, 1)
    stats = sorted(result.stats, key=lambda s: s.iteration)
    assert all(s.ran_on == "spark" for s in stats)
    assert [s.iteration for s in stats] == list(range(len(stats)))


def test_failure_mid_fixpoint_falls_back_to_spark_error(spark, view):
    # DuckDB fails on an overflow a few iterations in; the driver's work is dropped and Spark
    # reports the overflow itself
    q = """WITH recursive c (X, V) AS (SELECT 1, CAST(1152921504606846976 AS BIGINT))
             UNION (SELECT c.X + 1, c.V * 2 FROM c WHERE c.X < 10)
           SELECT X, V FROM c"""
    with pytest.raises(RecSQLError) as error:
        recsql.run(q, spark=spark, conf=ON).df.collect()
    assert "overflow" in str(error.value).lower()


def test_max_iterations_error_is_the_same(spark, view):
    # a count over a cycle never converges: the driver reports the same error as Spark
    view("arc", [(1, 2), (2, 1)], "Src int, Dst int")
    q = """WITH recursive walks (X, count() AS Cnt) AS (SELECT 1, 1)
             UNION (SELECT arc.Dst, walks.Cnt + 1 FROM walks, arc WHERE walks.X = arc.Src)
           SELECT X, Cnt FROM walks"""
    messages = []
    for conf in (ON, OFF):
        with pytest.raises(RecSQLError) as error:
            recsql.run(q, spark=spark, conf={**conf, "spark.recsql.maxIterations": 6})
        assert error.value.condition == "RECSQL_MAX_ITERATIONS"
        messages.append(str(error.value))
    assert messages[0] == messages[1]


# ---------------------------------------------------------------------------- from the start

def test_default_runs_the_whole_fixpoint_on_the_driver(spark, view):
    # default settings: the relations fit, so the base step runs on the driver too
    view("edge", WEIGHTED, "Src int, Dst int, Cost int")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
             UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
           SELECT Dst, Cost FROM path"""
    result = recsql.run(q, spark=spark)
    g = nx.DiGraph()
    g.add_weighted_edges_from(WEIGHTED)
    assert rows(result.df) == sorted(nx.single_source_dijkstra_path_length(g, 1).items())
    assert {ran_on for _, ran_on in places(result.stats)} == {"driver"}
    assert_driver_tail(result)


def test_the_driver_reports_each_iteration_as_it_runs(spark, view):
    """The progress callback hears of every driver iteration before the driver's fixpoint ends
    (a notebook's live display): a chain of 40 needs 40 iterations, so under maxIterations 8 the
    driver fails after its 8th; the callback has by then heard iterations 0..8, each from the
    driver. Reported only once DuckDB's fixpoint ended, it had heard none."""
    view("chain", [(i, i + 1) for i in range(40)], "Src int, Dst int")
    q = """WITH recursive reach (X) AS (SELECT 0)
             UNION (SELECT chain.Dst FROM reach, chain WHERE reach.X = chain.Src)
           SELECT X FROM reach"""
    seen = []
    with pytest.raises(RecSQLError) as error:
        recsql.run(q, spark=spark, conf={"spark.recsql.maxIterations": 8}, progress=seen.append)
    assert error.value.condition == "RECSQL_MAX_ITERATIONS"
    assert [(s.iteration, s.ran_on, s.delta_rows, s.total_rows) for s in seen] == \
        [(i, "driver", 1, i + 1) for i in range(9)]


def test_sum_count_head_keeps_the_base_step_on_spark(spark, view):
    # a base row's contributor is identified by Spark's JSON of the row: Spark makes it
    view("arc", DAG, "Src int, Dst int")
    result = recsql.run(COUNT_PATHS, spark=spark)
    assert rows(result.df) == sorted(count_paths(DAG, 1).items())
    assert places(result.stats)[0] == (0, "spark")
    assert_driver_tail(result)


def test_duckdb_memory_limit_stays_within_a_sixteenth_below_each_statements():
    # the limit a statement asks for moves with the memory available; DuckDB's limit in force
    # is never above it, nor more than a sixteenth below it (DuckDB reports it to 0.1 GiB)
    db = database.Database()
    cursor = db.cursor()
    units = {"MiB": 1 << 20, "GiB": 1 << 30}
    gib = 1 << 30
    try:
        for asked in [8 * gib, 8 * gib - (40 << 20), 6 * gib, int(6.1 * gib), 7 * gib, 9 * gib, 256 << 20]:
            db.limit_memory(cursor, asked)
            number, unit = cursor.execute("SELECT current_setting('memory_limit')").fetchall()[0][0].split()
            in_force = float(number) * units[unit]
            assert asked * 15 / 16 - 0.05 * gib <= in_force <= asked + 0.05 * gib, (asked, in_force)
    finally:
        cursor.close()


def test_a_driver_attempt_marks_its_phases_for_a_listener(spark):
    """benchmarks/drivermem.py profiles the driver's memory by phase from these records: each
    phase starts and ends, in order, and the fixpoint's end carries the estimates."""
    import logging

    from recsql.executor.endgame import driver

    seen = []

    class Listener(logging.Handler):
        def emit(self, record):
            seen.append((record.recsql_phase, record.recsql_edge, record.recsql_facts))

    listener = Listener(logging.DEBUG)
    driver.phases.addHandler(listener)
    driver.phases.setLevel(logging.DEBUG)
    try:
        edges = [(1, 2, 3), (2, 3, 4), (1, 3, 9)]
        spark.createDataFrame(edges, "Src INT, Dst INT, Cost INT").createOrReplaceTempView("phase_edge")
        got = recsql.sql("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT "
                         "e.Dst, path.Cost + e.Cost FROM path, phase_edge e WHERE path.Dst = e.Src) "
                         "SELECT Dst, Cost FROM path", spark=spark)
        assert sorted(map(tuple, got.collect())) == [(1, 0), (2, 3), (3, 7)]  # by hand
    finally:
        driver.phases.removeHandler(listener)
        driver.phases.setLevel(logging.NOTSET)
    assert [(p, e) for p, e, _ in seen] == [("pull", "start"), ("pull", "end"), ("fixpoint", "start"),
                                            ("fixpoint", "end"), ("write_back", "start"), ("write_back", "end")]
    assert set(seen[1][2]) == {"arrow_bytes", "arrow_chunks"}
    assert seen[3][2]["state_est"] > 0 and seen[3][2]["budget"] > 0
