"""Materialized views (docs/materialized-views.md): CREATE / REFRESH [FULL] / EXPLAIN REFRESH /
DROP MATERIALIZED VIEW. After every refresh the answer plain Spark reads equals an independent
oracle (a plain-Python Dijkstra, a plain-Python closure) over the base table as it is then;
EXPLAIN says which path the refresh takes, so each test also checks that appends took the
incremental path and a delete the full one. The incremental path is on by default
(`spark.recsql.refresh.incremental`), on the driver where the state fits it;
`test_appends_refresh_in_full_with_the_setting_off` holds what users get without it."""

from __future__ import annotations

import calendar
import logging
import os
import random
import time
from collections import defaultdict
from urllib.parse import urlparse

import oracles
import pytest
from conftest import rows, setting, unique_name

import recsql
from recsql.errors import RecSQLError
from recsql.planner.names import TableName
from recsql.statements import mv_storage

SSSP = """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT 0, 0, 0)
  UNION (SELECT e.Dst, p.Cost + e.Cost, p.Dst FROM path p, {edges} e WHERE p.Dst = e.Src)
SELECT Dst, Cost, Pred FROM path"""
# the appended table is read by the base branch too (plain, not as a partitioned join side)
REACH = """WITH recursive reach (Node) AS (SELECT Dst FROM {edges} WHERE Src = 0)
  UNION (SELECT e.Dst FROM reach r JOIN {edges} e ON r.Node = e.Src)
SELECT Node FROM reach"""
CC = """WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM {edges})
  UNION (SELECT e.Dst, cc.C FROM cc, {edges} e WHERE cc.X = e.Src)
SELECT X, C FROM cc"""


def sssp_oracle(edges):
    """(Dst, Cost, Pred) from node 0, Pred the least predecessor on a shortest path (the ranked
    tuple (Cost, Pred) is what min() with payload keeps)."""
    dist = oracles.dijkstra(edges, 0)
    pred = defaultdict(list)
    for u, v, c in edges:
        if u in dist and v != 0 and dist[u] + c == dist.get(v):
            pred[v].append(u)
    return sorted([(0, 0, 0)] + [(v, dist[v], min(pred[v])) for v in dist if v != 0])


def reach_oracle(edges):
    succ = defaultdict(set)
    for u, v, _ in edges:
        succ[u].add(v)
    found, frontier = set(), set(succ[0])
    while frontier:
        found |= frontier
        frontier = {w for n in frontier for w in succ[n]} - found
    return sorted((n,) for n in found)


def random_edges(rng, nodes, count):
    return [(rng.randrange(nodes), rng.randrange(nodes), rng.randint(1, 9)) for _ in range(count)]


@pytest.fixture
def edges(spark):
    name = unique_name("mv_edges")
    made: list[str] = []
    yield name, made
    for view in made:
        recsql.sql(f"DROP MATERIALIZED VIEW IF EXISTS {view}", spark=spark)
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def write(spark, name, data, mode="append"):
    df = spark.createDataFrame(data, "Src int, Dst int, Cost int")
    if mode == "create":
        df.write.saveAsTable(name, format="parquet")
    else:
        df.write.insertInto(name, overwrite=mode == "overwrite")


def path_of(spark, view) -> str:
    return recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark).splitlines()[0]


def create(spark, made, query, table):
    view = unique_name("mv")
    recsql.sql(f"CREATE MATERIALIZED VIEW {view} AS {query.format(edges=table)}", spark=spark)
    made.append(view)
    return view


def check(spark, views, data):
    sssp, reach = views
    assert rows(spark.table(sssp)) == sssp_oracle(data)  # plain Spark reads the answer
    assert rows(spark.table(reach)) == reach_oracle(data)


def test_appends_refresh_incrementally_then_unchanged(spark, edges):
    """Appends continued on the driver from the stored state's files; a refresh with nothing
    changed since is the unchanged path. Appends after appends, after deletes and updates, and
    deletes themselves are the later tests' (the kept copy, the random changes)."""
    rng = random.Random(7)
    table, made = edges
    data = random_edges(rng, 10, 14)
    write(spark, table, data, "create")
    views = (create(spark, made, SSSP, table), create(spark, made, REACH, table))
    check(spark, views, data)
    more = random_edges(rng, 12, rng.randint(1, 4))
    write(spark, table, more)
    data += more
    for view in views:
        assert path_of(spark, view).endswith(": incremental refresh")
        refreshed = recsql.refresh(view, spark=spark)
        # continued on the driver from the stored state's files (executor/endgame/seeded.py)
        assert {s.ran_on for s in refreshed.stats} == {"driver"}
        assert path_of(spark, view).endswith(": unchanged refresh")
    check(spark, views, data)


def test_on_the_spark_loop_appends_continue_and_a_delete_is_refreshed_in_full(spark, spark_loop, edges):
    """With the driver endgame off: the seeded group continued by the Spark loop itself after
    appends (one lowers a stored cost, so the first delta improves a row and the loop carries it
    on); after a delete, whose re-derivation runs on the driver only, EXPLAIN says the refresh
    is full and why. A full refresh on the Spark loop is the run CREATE made here (checked
    against the oracle) again; `test_the_driver_writes_the_version_plain_spark_reads` runs one.
    Each Spark-loop statement costs about 4.5 CPU s here, whatever the graph's size."""
    table, made = edges
    data = [(0, 1, 1), (1, 2, 1), (0, 2, 5)]
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    assert rows(spark.table(view)) == sssp_oracle(data)
    more = [(0, 2, 1), (2, 3, 1)]
    write(spark, table, more)
    data += more
    assert path_of(spark, view).endswith(": incremental refresh")
    recsql.sql(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert rows(spark.table(view)) == sssp_oracle(data) == [(0, 0, 0), (1, 1, 0), (2, 1, 0), (3, 2, 2)]
    data.remove((0, 2, 1))
    write(spark, table, data, "overwrite")
    text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert text.splitlines()[0].endswith(": full refresh"), text
    assert "re-derived on the driver only, and spark.recsql.endgame.enabled is false" in text


def test_appends_refresh_in_full_with_the_setting_off(spark, edges):
    """With the setting off, an append a continued fixpoint could take is recomputed, and EXPLAIN
    says why and how to continue instead; DESCRIBE TABLE EXTENDED says how it was refreshed."""
    with setting(spark, "spark.recsql.refresh.incremental", "false"):
        _appends_refresh_in_full(spark, edges)


def _appends_refresh_in_full(spark, edges):
    table, made = edges
    data = [(0, 1, 4), (1, 2, 1)]
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    more = [(0, 2, 2), (2, 3, 1)]
    write(spark, table, more)
    data += more
    text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert text.splitlines()[0].endswith(": full refresh"), text
    assert "SET spark.recsql.refresh.incremental = true" in text
    recsql.refresh(view, spark=spark)
    assert rows(spark.table(view)) == sssp_oracle(data)
    # DESCRIBE TABLE EXTENDED: Spark's rows as Spark writes them, then when and how it refreshed
    spark_rows = [tuple(r) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {view}").collect()]
    ours = [tuple(r) for r in recsql.sql(f"DESCRIBE TABLE EXTENDED {view}", spark=spark).collect()]
    assert ours[:len(spark_rows)] == spark_rows
    added = {name: value for name, value, _ in ours[len(spark_rows):]}
    assert added["Last Refresh"].startswith("full: rows were only appended")
    assert time.time() - calendar.timegm(time.strptime(added["Last Refreshed"], "%Y-%m-%d %H:%M:%S UTC")) < 600
    plain = [tuple(r) for r in recsql.sql(f"DESCRIBE TABLE EXTENDED {table}", spark=spark).collect()]
    assert plain == [tuple(r) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()]


def test_a_failed_refresh_leaves_the_previous_answer(spark, edges):
    table, made = edges
    data = [(0, 1, 1)]
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    before = rows(spark.table(view))
    described = spark.sql(f"SHOW TBLPROPERTIES {view}").collect()
    tables = {t.name for t in spark.catalog.listTables()}
    chain = [(i, i + 1, 1) for i in range(1, 40)]  # 39 more iterations than the stored fixpoint
    write(spark, table, chain)
    with pytest.raises(RecSQLError) as failed:
        recsql.sql(f"REFRESH MATERIALIZED VIEW {view}", spark=spark,
                   conf={"spark.recsql.maxIterations": 5})
    assert failed.value.condition == "RECSQL_MAX_ITERATIONS"
    assert rows(spark.table(view)) == before == sssp_oracle(data)
    assert spark.sql(f"SHOW TBLPROPERTIES {view}").collect() == described
    assert {t.name for t in spark.catalog.listTables()} == tables  # nothing half-written left
    recsql.refresh(view, spark=spark)
    assert rows(spark.table(view)) == sssp_oracle(data + chain)


def test_bad_input_is_refused_and_leaves_the_view(spark, edges):
    table, made = edges
    data = [(0, 1, 2), (1, 2, 2)]
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    with pytest.raises(RecSQLError) as error:
        recsql.sql(f"REFRESH MATERIALIZED VIEW {table}", spark=spark)
    assert error.value.condition == "RECSQL_NOT_A_MATERIALIZED_VIEW"
    assert "is a table or view, not a materialized view" in str(error.value)
    with pytest.raises(RecSQLError) as error:
        recsql.sql(f"DROP MATERIALIZED VIEW {table}", spark=spark)
    assert error.value.condition == "RECSQL_NOT_A_MATERIALIZED_VIEW"
    with pytest.raises(RecSQLError) as error:
        recsql.sql(f"CREATE MATERIALIZED VIEW {view} AS {SSSP.format(edges=table)}", spark=spark)
    assert error.value.condition == "TABLE_OR_VIEW_ALREADY_EXISTS"

    spark.sql(f"DROP TABLE {table}")
    with pytest.raises(RecSQLError) as error:
        recsql.sql(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert error.value.condition == "RECSQL_MATERIALIZED_VIEW_BASE_DROPPED"
    assert "FULL" in str(error.value)
    assert rows(spark.table(view)) == sssp_oracle(data)

    spark.createDataFrame([(0, 1, 2, "x")], "Src int, Dst int, Cost int, Note string") \
        .write.saveAsTable(table, format="parquet")
    with pytest.raises(RecSQLError) as error:
        recsql.sql(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert error.value.condition == "RECSQL_MATERIALIZED_VIEW_BASE_CHANGED"
    assert rows(spark.table(view)) == sssp_oracle(data)
    recsql.sql(f"REFRESH MATERIALIZED VIEW {view} FULL", spark=spark)
    assert rows(spark.table(view)) == sssp_oracle([(0, 1, 2)])


def test_what_falls_back_says_why(spark, edges):
    table, made = edges
    write(spark, table, [(0, 1, 1), (1, 2, 1)], "create")
    counting = create(spark, made, """WITH recursive paths (Dst, count() AS N) AS (SELECT 0, 1)
      UNION (SELECT e.Dst, p.N FROM paths p, {edges} e WHERE p.Dst = e.Src)
      SELECT Dst, N FROM paths""", table)
    twice = create(spark, made, """WITH recursive reach (Node) AS (SELECT 0)
      UNION (SELECT b.Dst FROM reach r, {edges} a, {edges} b WHERE r.Node = a.Src AND a.Dst = b.Src)
      SELECT Node FROM reach""", table)
    over_view = unique_name("mv_edges_view")
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {over_view} AS SELECT * FROM {table}")
    on_view = create(spark, made, REACH, over_view)
    write(spark, table, [(2, 3, 1)])
    expected = {counting: "aggregates with count", twice: f"reads {table} 2 times",
                on_view: "is a view, whose rows have no files"}
    for view, why in expected.items():
        text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
        assert text.splitlines()[0].endswith(": full refresh"), text
        assert why in text
    # a full refresh runs the definition again, as CREATE does (the other two views' refreshes
    # would be that run again); the view over a view shows it reads the rows as they are now
    recsql.refresh(on_view, spark=spark)
    assert rows(spark.table(counting)) == [(0, 1), (1, 1), (2, 1)]  # one path each
    assert rows(spark.table(twice)) == [(0,), (2,)]  # even-length paths from 0
    assert rows(spark.table(on_view)) == reach_oracle([(0, 1, 1), (1, 2, 1), (2, 3, 1)])


def test_a_query_not_monotone_in_a_base_is_refreshed_in_full(spark, edges):
    """An anti join or an outer join of a base table: a row appended there takes stored rows
    away (a node newly blocked, a padded row now matched), a row removed adds some, so neither
    continues from the stored fixpoint (a continued one kept the blocked node's rows); the
    answers are the plain-Python ones after each change."""
    table, made = edges
    blocked = unique_name("mv_blocked")
    data = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (0, 4, 1), (4, 5, 1)]
    write(spark, table, data, "create")
    spark.createDataFrame([(9,)], "Node int").write.saveAsTable(blocked, format="parquet")
    avoiding = create(spark, made, """WITH recursive reach (Node) AS (SELECT 0)
      UNION (SELECT e.Dst FROM reach r JOIN {edges} e ON r.Node = e.Src
             LEFT ANTI JOIN BLOCKED b ON b.Node = e.Dst) SELECT Node FROM reach""".replace("BLOCKED", blocked),
                      table)
    marked = create(spark, made, """WITH recursive reach (Node, Mark) AS (SELECT 0, 0)
      UNION (SELECT e.Dst, b.Node FROM reach r JOIN {edges} e ON r.Node = e.Src
             LEFT JOIN BLOCKED b ON b.Node = e.Dst) SELECT Node, Mark FROM reach""".replace("BLOCKED", blocked),
                    table)

    def check_after(blocks):
        free = {(0,)} | set(reach_oracle([e for e in data if e[1] not in blocks]))
        assert set(rows(spark.table(avoiding))) == free
        assert set(rows(spark.table(marked))) == \
            {(0, 0)} | {(n, n if n in blocks else None) for (n,) in reach_oracle(data)}

    try:
        check_after({9})
        for change, blocks in (("append", {9, 1}), ("overwrite", {9})):
            spark.createDataFrame([(1,)] if change == "append" else [(9,)], "Node int") \
                .write.insertInto(blocked, overwrite=change == "overwrite")
            for view in (avoiding, marked):
                text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
                assert text.splitlines()[0].endswith(": full refresh"), text
                assert "not monotone" in text
                recsql.refresh(view, spark=spark)
            check_after(blocks)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {blocked}")


def test_appends_to_two_tables_one_branch_reads(spark, edges):
    """New rows of one table meet old rows of the other: each appended table is read alone in
    turn, the other whole."""
    table, made = edges
    allowed = unique_name("mv_allowed")
    write(spark, table, [(0, 1, 1), (1, 2, 1), (2, 3, 1)], "create")
    spark.createDataFrame([(1,)], "Node int").write.saveAsTable(allowed, format="parquet")
    try:
        view = create(spark, made, """WITH recursive reach (Node) AS (SELECT 0)
          UNION (SELECT e.Dst FROM reach r JOIN {edges} e ON r.Node = e.Src
                 JOIN """ + allowed + """ a ON e.Dst = a.Node)
          SELECT Node FROM reach""", table)
        assert rows(spark.table(view)) == [(0,), (1,)]
        write(spark, table, [(1, 4, 1)])  # a new edge to a new allowed node
        spark.createDataFrame([(2,), (4,)], "Node int").write.insertInto(allowed)
        assert path_of(spark, view).endswith(": incremental refresh")
        recsql.refresh(view, spark=spark)
        edges_now, allowed_now = {(0, 1), (1, 2), (2, 3), (1, 4)}, {1, 2, 4}
        found = {0}
        while grown := {d for s, d in edges_now if s in found and d in allowed_now} - found:
            found |= grown
        assert rows(spark.table(view)) == sorted((n,) for n in found)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {allowed}")


def test_appends_to_a_table_a_subquery_reads_refresh_in_full(spark, edges):
    """`e.Cost <= (SELECT max(Cap) FROM caps)` runs as its value, evaluated once: a row appended
    to `caps` changes it, and with it what the stored rows derive (here nothing the appended row
    joins), so the refresh is a full one."""
    table, made = edges
    caps = unique_name("mv_caps")
    write(spark, table, [(0, 1, 1), (1, 2, 5), (2, 3, 1)], "create")
    spark.createDataFrame([(2,)], "Cap int").write.saveAsTable(caps, format="parquet")
    try:
        view = create(spark, made, """WITH recursive reach (Node) AS (SELECT 0)
          UNION (SELECT e.Dst FROM reach r JOIN {edges} e ON r.Node = e.Src
                 WHERE e.Cost <= (SELECT max(Cap) FROM """ + caps + """))
          SELECT Node FROM reach""", table)
        assert rows(spark.table(view)) == [(0,), (1,)]
        spark.createDataFrame([(5,)], "Cap int").write.insertInto(caps)
        text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
        assert text.splitlines()[0].endswith(": full refresh") and "whose value new rows change" in text, text
        recsql.refresh(view, spark=spark)
        assert rows(spark.table(view)) == [(0,), (1,), (2,), (3,)]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {caps}")


def test_appends_to_a_table_a_correlated_subquery_reads_refresh_in_full(spark, edges):
    """Each node's cheapest edges alone: an appended cheaper edge out of a node takes away the
    edge it reached before, and the nodes beyond it (the continued fixpoint would keep them)."""
    table, made = edges
    data = [(0, 1, 1), (1, 2, 1)]
    write(spark, table, data, "create")
    view = create(spark, made, """WITH recursive reach (Node) AS (SELECT 0)
      UNION (SELECT e.Dst FROM reach r JOIN {edges} e ON r.Node = e.Src
             WHERE e.Cost = (SELECT min(x.Cost) FROM {edges} x WHERE x.Src = e.Src))
      SELECT Node FROM reach""", table)

    def cheapest(edges_now):
        least = {u: min(c for s, _, c in edges_now if s == u) for u, _, _ in edges_now}
        return [(0,)] + reach_oracle([(u, v, c) for u, v, c in edges_now if c == least[u]])

    assert rows(spark.table(view)) == cheapest(data)
    write(spark, table, [(0, 3, 0)])
    text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
    assert text.splitlines()[0].endswith(": full refresh") and "whose value new rows change" in text, text
    recsql.refresh(view, spark=spark)
    assert rows(spark.table(view)) == cheapest(data + [(0, 3, 0)]) == [(0,), (3,)]


def cc_oracle(edges):
    """(X, C): every edge's source with the least node of its component (the table symmetric)."""
    return sorted(oracles.min_label_components([(u, v) for u, v, _ in edges]))


def symmetric(data):
    return data + [(v, u, c) for u, v, c in data]


def test_a_delete_on_a_winning_path_and_one_that_disconnects(spark, edges):
    """The removed edge carried shortest paths (the nodes past it move to a longer path or out
    of reach) and held a component together (it splits, each part labelled anew)."""
    table, made = edges
    data = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (0, 3, 10), (3, 4, 1), (5, 6, 0), (6, 5, 0), (4, 5, 1)]
    write(spark, table, data, "create")
    sssp, reach = create(spark, made, SSSP, table), create(spark, made, REACH, table)
    undirected = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 4, 1)]
    cc_table = unique_name("mv_cc")
    write(spark, cc_table, symmetric(undirected), "create")
    try:
        cc = create(spark, made, CC, cc_table)
        assert rows(spark.table(sssp)) == [(0, 0, 0), (1, 1, 0), (2, 2, 1), (3, 3, 2), (4, 4, 3),
                                           (5, 5, 4), (6, 5, 5)]
        data.remove((1, 2, 1))
        write(spark, table, data, "overwrite")
        undirected.remove((1, 2, 1))
        write(spark, cc_table, symmetric(undirected), "overwrite")
        for view in (sssp, reach, cc):
            assert path_of(spark, view).endswith(": incremental refresh")
            recsql.refresh(view, spark=spark)
        # hand-computed: 3 now by the direct edge; 2 out of reach; 5 and 6 (a zero-cost cycle,
        # each the other's predecessor candidate) follow 4
        assert rows(spark.table(sssp)) == [(0, 0, 0), (1, 1, 0), (3, 10, 0), (4, 11, 3),
                                           (5, 12, 4), (6, 12, 5)] == sssp_oracle(data)
        assert rows(spark.table(reach)) == [(1,), (3,), (4,), (5,), (6,)] == reach_oracle(data)
        assert rows(spark.table(cc)) == [(0, 0), (1, 0), (2, 2), (3, 2), (4, 2)]
        # the zero-cost cycle cut from the source: its rows derive each other but from nothing
        data.remove((4, 5, 1))
        write(spark, table, data, "overwrite")
        recsql.refresh(sssp, spark=spark)
        recsql.refresh(reach, spark=spark)
        assert rows(spark.table(sssp)) == sssp_oracle(data) == [(0, 0, 0), (1, 1, 0), (3, 10, 0), (4, 11, 3)]
        assert rows(spark.table(reach)) == reach_oracle(data)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {cc_table}")


FROM_REMOVED = "the removed rows are found against the base's files at the last refresh"


def test_random_deletes_updates_and_appends_refresh_incrementally(spark, edges):
    """Random deletes, updates (a delete and an append in one rewrite) and appends of a
    symmetric graph with zero-cost edges (each a zero-cost cycle, so shortest paths tie and
    predecessors can point at each other): each refresh takes the incremental path on the
    driver; after a delete it starts from the removed rows for SSSP (a payload: the base's files
    at the last refresh are kept as hard links, what the removed rows derived is reset and only
    those keys re-derived), the grounding walk for the others; after each refresh every view
    equals its plain-Python oracle over the table as it is then."""
    rng = random.Random(3)
    table, made = edges
    undirected = [(rng.randrange(30), rng.randrange(30), rng.randint(0, 4)) for _ in range(45)]
    write(spark, table, symmetric(undirected), "create")
    queries = {SSSP: sssp_oracle, REACH: reach_oracle, CC: cc_oracle}
    views = {create(spark, made, query, table): oracle for query, oracle in queries.items()}
    # each kind after each other kind it followed in the two seeds' six rounds this replaced
    for kind in ("delete", "update", "delete", "append", "update"):
        removed = rng.sample(undirected, rng.randint(1, 4)) if kind != "append" else []
        added = [] if kind == "delete" else [
            (rng.randrange(32), rng.randrange(32), rng.randint(0, 4)) for _ in range(3)]
        for edge in removed:  # both directions: the table stays symmetric, as CC needs
            undirected.remove(edge)
        undirected += added
        data = symmetric(undirected)
        write(spark, table, data if removed else symmetric(added), "overwrite" if removed else "append")
        for view, oracle in views.items():
            text = recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark)
            assert text.splitlines()[0].endswith(": incremental refresh"), text
            if removed:
                assert "were removed or rewritten" in text and "re-derived" in text, text
            assert (FROM_REMOVED in text.splitlines()[1]) == (bool(removed) and oracle is sssp_oracle), text
            refreshed = recsql.refresh(view, spark=spark)
            assert {s.ran_on for s in refreshed.stats} == {"driver"}, (kind, view)
            assert rows(spark.table(view)) == oracle(data), (kind, view)


def test_a_failed_refresh_after_a_delete_leaves_the_previous_answer(spark, edges):
    """A refresh from the removed rows stopped midway (its re-derivation over the iteration
    limit) leaves the old answer readable and the old version's kept files, so the next
    refresh still starts from the removed rows."""
    table, made = edges
    data = [(i, i + 1, 1) for i in range(30)] + [(0, 1, 1)]
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    before = rows(spark.table(view))
    tables = {t.name for t in spark.catalog.listTables()}
    data = data[1:-1] + [(0, 1, 3)]  # every shortest path passes the updated edge
    write(spark, table, data, "overwrite")
    with pytest.raises(RecSQLError) as failed:
        recsql.sql(f"REFRESH MATERIALIZED VIEW {view}", spark=spark,
                   conf={"spark.recsql.maxIterations": 5})
    assert failed.value.condition == "RECSQL_MAX_ITERATIONS"
    assert rows(spark.table(view)) == before
    assert {t.name for t in spark.catalog.listTables()} == tables
    assert FROM_REMOVED in recsql.explain(f"REFRESH MATERIALIZED VIEW {view}", spark=spark).splitlines()[1]
    recsql.refresh(view, spark=spark)
    assert rows(spark.table(view)) == sssp_oracle(data)


def _written_by_spark(spark, table) -> bool:
    """Whether Spark's writer wrote `table` (its commit leaves a `_SUCCESS` marker); the
    driver's own write leaves one parquet file alone (`mv_storage.write`)."""
    files = [urlparse(f).path for f in spark.table(table).inputFiles()]
    return os.path.exists(os.path.join(os.path.dirname(files[0]), "_SUCCESS"))


def test_the_driver_writes_the_version_plain_spark_reads(spark, edges):
    """Where the driver finished the fixpoint and the final query only picks the recursive
    CTE's columns (renamed, reordered), the driver writes the answer and the state itself; a
    final query that filters is written by Spark. Either way plain Spark reads the oracle's
    answer, in the columns and types a Spark-written version has, and the next refresh
    continues from the state the driver wrote."""
    rng = random.Random(5)
    table, made = edges
    data = random_edges(rng, 10, 16)
    write(spark, table, data, "create")
    picked = create(spark, made, SSSP.replace("SELECT Dst, Cost, Pred FROM path",
                                              "SELECT Cost AS c, Dst FROM path"), table)
    filtered = create(spark, made, SSSP.replace("SELECT Dst, Cost, Pred FROM path",
                                                "SELECT Dst, Cost FROM path WHERE Cost > 2"), table)
    with setting(spark, "spark.recsql.endgame.enabled", "false"):  # Spark writes everything
        recsql.refresh(picked, full=True, spark=spark)
    spark_schema = spark.table(picked).schema
    assert _written_by_spark(spark, mv_storage.read(spark, TableName.parse(picked)).answer)
    for _ in range(2):
        more = random_edges(rng, 12, 3)
        write(spark, table, more)
        data += more
        for view in (picked, filtered):
            assert path_of(spark, view).endswith(": incremental refresh")
            refreshed = recsql.refresh(view, spark=spark)
            assert {s.ran_on for s in refreshed.stats} == {"driver"}
        expected = sssp_oracle(data)
        assert rows(spark.table(picked)) == sorted((c, d) for d, c, _ in expected)
        assert rows(spark.table(filtered)) == sorted((d, c) for d, c, _ in expected if c > 2)
        assert spark.table(picked).schema == spark_schema
        stored = {v: mv_storage.read(spark, TableName.parse(v)) for v in (picked, filtered)}
        assert not _written_by_spark(spark, stored[picked].answer)
        assert _written_by_spark(spark, stored[filtered].answer)
        for view in (picked, filtered):
            assert not any(_written_by_spark(spark, s["table"]) for s in stored[view].states.values())


def test_an_answer_kept_as_its_state_and_a_refresh_overtaken(spark, edges):
    """Where the final query is the recursive CTE's state as it stands (`SELECT Dst, Cost, Pred
    FROM path`), a version keeps one table, answer and state alike, which plain Spark reads as
    the oracle's answer and DROP MATERIALIZED VIEW drops. A refresh overtaken by another one
    (run from its progress callback, after it read the stored state) fails with
    RECSQL_MATERIALIZED_VIEW_CONCURRENT_REFRESH and leaves the other's version, whole and
    correct; the next refresh continues from it."""
    rng = random.Random(11)
    table, made = edges
    data = random_edges(rng, 12, 20)
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    stored = mv_storage.read(spark, TableName.parse(view))
    assert stored.tables == [stored.answer] == [s["table"] for s in stored.states.values()]
    assert rows(spark.table(view)) == sssp_oracle(data)
    first, second = random_edges(rng, 14, 4), random_edges(rng, 14, 4)
    write(spark, table, first)
    overtaken = []

    def overtake(_stats):
        if not overtaken:
            overtaken.append(recsql.refresh(view, spark=spark))

    with pytest.raises(RecSQLError) as failed:
        recsql.refresh(view, spark=spark, progress=overtake)
    assert overtaken and failed.value.condition == "RECSQL_MATERIALIZED_VIEW_CONCURRENT_REFRESH"
    assert rows(spark.table(view)) == sssp_oracle(data + first)
    now = mv_storage.read(spark, TableName.parse(view))
    prefix = mv_storage.PREFIX + TableName.parse(view).parts[-1]
    assert {t.name for t in spark.catalog.listTables() if t.name.startswith(prefix)} == \
        {TableName.parse(t).parts[-1] for t in now.tables}
    write(spark, table, second)
    assert path_of(spark, view).endswith(": incremental refresh")
    recsql.refresh(view, spark=spark)
    assert rows(spark.table(view)) == sssp_oracle(data + first + second)
    recsql.sql(f"DROP MATERIALIZED VIEW {view}", spark=spark)
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith(prefix)]


def _copy_read(caplog) -> str:
    """How the last refresh had the table's driver copy (`recsql.executor.state.bases`): a kept
    copy grown by the new files' rows, a kept copy as it was, or the table read whole."""
    messages = [r.getMessage() for r in caplog.records]
    if any("grown by the rows" in m for m in messages):
        return "grown"
    return "kept" if any("pulled copy" in m and "kept from an earlier" in m for m in messages) else "read"


def test_appends_grow_the_kept_copy_of_the_table(spark, edges, caplog):
    """Appends in a row, refreshed in one warm application: the table's driver copy kept from
    the view's last refresh is grown by the new files' rows, not read again whole (the second
    view then finds it current). A copy that is not of the table as it was at the view's last
    refresh (a refresh that kept none, a rewrite of the table, a cold start) is not grown: the
    table is read whole. Each change adds a pair of new nodes joined by an edge, apart from the
    rest, and joins the pair of the change before to node 0: the second node of that pair is
    reached through the earlier change's edge, which a copy missing its rows would not have.
    Every answer equals its oracle (Dijkstra, union-find)."""
    from recsql.executor.state import bases

    rng = random.Random(23)
    table, made = edges
    undirected = [(rng.randrange(8), rng.randrange(8), rng.randint(1, 4)) for _ in range(12)] + [(0, 1, 1)]
    write(spark, table, symmetric(undirected), "create")
    views = {create(spark, made, SSSP, table): sssp_oracle, create(spark, made, CC, table): cc_oracle}
    rounds = [("append", {}, ("grown", "kept")),
              ("append", {"spark.recsql.base.keep": "0"}, ("read", "read")),
              ("append", {}, ("read", "kept")), ("rewrite", {}, ("read", "kept")),
              ("append", {}, ("grown", "kept")), ("new session", {}, ("grown", "kept")),
              ("cold", {}, ("read", "kept"))]
    pair = (1, 1)
    for number, (kind, conf, expected) in enumerate(rounds):
        session = spark.newSession() if kind == "new session" else spark
        if kind == "cold":
            bases.forget(spark)
        joined, pair = (0, pair[0], 1), (100 + 2 * number, 101 + 2 * number)
        added = [(rng.randrange(8), rng.randrange(8), rng.randint(1, 4)), (*pair, 1), joined]
        if kind == "rewrite":  # a delete and an append: every file rewritten
            undirected = rng.sample(undirected, len(undirected) - 2) + added
            write(spark, table, symmetric(undirected), "overwrite")
        else:
            undirected += added
            write(spark, table, symmetric(added))
        data = symmetric(undirected)
        for (view, oracle), how in zip(views.items(), expected):
            assert path_of(spark, view).endswith(": incremental refresh"), kind
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="recsql.executor.state.bases"):
                refreshed = recsql.refresh(view, spark=session, conf=conf)
            assert {s.ran_on for s in refreshed.stats} == {"driver"}, kind
            assert rows(spark.table(view)) == oracle(data), (kind, view)
            assert (kind, _copy_read(caplog)) == (kind, how)


def _staging_left(spark) -> list[str]:
    """The directories a refresh stages its states in (`materialized._staging`) still there."""
    location = spark.catalog.getDatabase(spark.catalog.currentDatabase()).locationUri
    return [n for n in os.listdir(urlparse(location).path) if n.startswith(".recsql_staging_")]


def test_a_base_changed_while_refreshing_leaves_the_previous_answer(spark, edges, caplog):
    """A base's files re-checked before the switch, on the local disk first: what Spark skips
    (hidden files, `_SUCCESS`) changes nothing, and the local check agrees with Spark's own
    listing of the table (`inputFiles()`, the oracle); an append made while the refresh runs
    (from its progress callback) fails it with RECSQL_MATERIALIZED_VIEW_BASE_CHANGED and leaves
    the previous answer; the next refresh takes the append in (Dijkstra). Either way the
    directory where the driver staged the state it finished is gone."""
    from recsql.executor.state.bases import file_identity
    from recsql.statements import materialized

    rng = random.Random(31)
    table, made = edges
    data = random_edges(rng, 10, 14)
    write(spark, table, data, "create")
    view = create(spark, made, SSSP, table)
    name = TableName.parse(table)
    root = mv_storage.table_directory(spark, name.sql)
    files = [list(f) for f in file_identity(spark.table(name.sql))[0]]

    def spark_lists_the_same() -> bool:
        spark.catalog.refreshTable(name.sql)
        return [list(f) for f in file_identity(spark.table(name.sql))[0]] == files

    assert materialized._same_on_disk(root, files) and spark_lists_the_same()
    for skipped in (".hidden", "_SUCCESS", "part-0.parquet._COPYING_"):
        open(os.path.join(root, skipped), "w").close()
        assert materialized._same_on_disk(root, files) and spark_lists_the_same(), skipped
        os.remove(os.path.join(root, skipped))
    first = urlparse(files[0][0]).path
    os.utime(first, ns=(files[0][2] + 10**9, files[0][2] + 10**9))  # rewritten in place
    assert not materialized._same_on_disk(root, files) and not spark_lists_the_same()
    files = [list(f) for f in file_identity(spark.table(name.sql))[0]]
    assert materialized._same_on_disk(root, files)
    assert not materialized._same_on_disk(None, files)

    first_append, second_append = random_edges(rng, 12, 3), random_edges(rng, 12, 3)
    write(spark, table, first_append)
    appended = []

    def append(_stats):
        if not appended:
            write(spark, table, second_append)
            appended.append(True)

    before = rows(spark.table(view))
    with pytest.raises(RecSQLError) as failed:
        recsql.refresh(view, spark=spark, progress=append)
    assert appended and failed.value.condition == "RECSQL_MATERIALIZED_VIEW_BASE_CHANGED"
    assert rows(spark.table(view)) == before == sssp_oracle(data)
    assert not _staging_left(spark)
    with caplog.at_level(logging.INFO, logger="recsql.executor.endgame.seeded"):
        recsql.refresh(view, spark=spark)
    assert any("staged as a parquet file" in r.getMessage() for r in caplog.records)
    assert rows(spark.table(view)) == sssp_oracle(data + first_append + second_append)
    assert not _staging_left(spark)
