"""recsql through Spark Connect: a server started from the installed pyspark's own scripts,
listening on 127.0.0.1 only (`connect_server` in tests/conftest.py, shared with the notebook's
test). In the default suite (about 25 s): nothing else notices when a change breaks Connect (an
aggregate over `spark_partition_id()` once did)."""

from __future__ import annotations

import os

import networkx as nx
import pytest

import recsql


@pytest.fixture(scope="module")
def connect(connect_server):
    from pyspark.sql import SparkSession

    # a remote session switches the whole process to Connect mode through os.environ
    # (SPARK_CONNECT_MODE_ENABLED, SPARK_REMOTE); later tests must get a classic session again
    saved = dict(os.environ)
    try:
        session = SparkSession.builder.remote(connect_server).create()
        yield session
        session.stop()
    finally:
        os.environ.clear()
        os.environ.update(saved)


EDGES = [(1, 2, 4), (2, 3, 1), (1, 3, 7), (3, 4, 2), (4, 1, 1), (4, 5, 3)]


# the default path; the Spark loop, where every iteration reads the adjacency index (its direct
# form rewrites the branch's SQL, index.py); and the Spark loop with the index off. On both Spark
# loops a tiny delta's keys (which filter the index, or the flat copy) come from the observation
# that Connect does not report for a checkpoint (recomputed: action.checkpoint_merge)
SPARK_LOOP = {"spark.recsql.endgame.enabled": "false"}
SCAN = {**SPARK_LOOP, "spark.recsql.index.enabled": "false"}


@pytest.mark.parametrize("conf", [{}, SPARK_LOOP, SCAN], ids=["default", "spark-loop-index", "spark-loop-lookup"])
def test_sssp_over_connect_matches_dijkstra(connect, conf):
    connect.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").createOrReplaceTempView("edge")
    result = recsql.run(
        "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT edge.Dst, "
        "path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path",
        spark=connect, conf=conf,
    )
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    expected = sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
    assert sorted(tuple(r) for r in result.df.collect()) == expected
    assert result.stats[-1].delta_rows == 0
    assert any(s.index for s in result.stats) == (conf == SPARK_LOOP)
    assert any(s.lookup for s in result.stats) == (conf in (SPARK_LOOP, SCAN))


@pytest.mark.parametrize("conf", [{}, SPARK_LOOP], ids=["default", "spark-loop"])
def test_sssp_predecessors_over_connect(connect, conf):
    """Payload columns: the Spark loop's merge over a struct, through Connect."""
    from oracles import dijkstra_predecessors

    edges = [*EDGES, (1, 6, 2), (6, 3, 3), (2, 5, 7)]  # 3 costs 5 via 2 and via 6: a tie
    connect.createDataFrame(edges, "Src INT, Dst INT, Cost INT").createOrReplaceTempView("edge")
    df = recsql.sql(
        "WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT 1, 0, 1) UNION "
        "(SELECT edge.Dst, path.Cost + edge.Cost, edge.Src FROM path, edge WHERE path.Dst = edge.Src) "
        "SELECT Dst, Cost, Pred FROM path", spark=connect, conf=conf)
    expected = sorted((v, c, p) for v, (c, p) in dijkstra_predecessors(edges, 1, (1,)).items())
    assert sorted(tuple(r) for r in df.collect()) == expected


@pytest.fixture(scope="module")
def qualified_edges(connect):
    """EDGES as the parquet table `connect_names.edges`, written once for the tests that only read
    it (a table written and a schema dropped cost more than the statement reading them)."""
    connect.sql("CREATE SCHEMA IF NOT EXISTS connect_names")
    connect.createDataFrame(EDGES, "src INT, dst INT, cost INT").write.mode("overwrite") \
        .format("parquet").saveAsTable("connect_names.edges")
    yield
    connect.sql("DROP SCHEMA connect_names CASCADE")


@pytest.mark.parametrize("conf", [{}, SPARK_LOOP], ids=["default", "spark-loop"])
def test_qualified_table_over_connect(connect, qualified_edges, conf):
    """A schema-qualified table (dbt's `{{ ref() }}`) in a recursive branch, and a missing one."""
    query = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT e.dst, "
             "path.Cost + e.cost FROM path, `connect_names`.`edges` AS e WHERE path.Dst = e.src) "
             "SELECT Dst, Cost FROM path")
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    expected = sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
    assert sorted(tuple(r) for r in recsql.sql(query, spark=connect, conf=conf).collect()) == expected
    with pytest.raises(recsql.RecSQLError) as info:
        recsql.sql(query.replace("`edges`", "`edgez`"), spark=connect, conf=conf).collect()
    assert info.value.condition == "TABLE_OR_VIEW_NOT_FOUND" and info.value.line == 1
    assert "`connect_names`.`edgez`" in info.value.message


def test_connected_components_over_connect_match_networkx(connect):
    edges = [(1, 2), (2, 3), (4, 5), (6, 6), (7, 5)]
    undirected = edges + [(b, a) for a, b in edges]
    connect.createDataFrame(undirected, "Src INT, Dst INT").createOrReplaceTempView("cc_edge")
    df = recsql.sql(
        "WITH recursive cc (Node, min() AS Comp) AS (SELECT Src, Src FROM cc_edge) UNION "
        "(SELECT cc_edge.Dst, cc.Comp FROM cc, cc_edge WHERE cc.Node = cc_edge.Src) "
        "SELECT Node, Comp FROM cc",
        spark=connect,
    )
    graph = nx.Graph(edges)
    expected = sorted((n, min(c)) for c in nx.connected_components(graph) for n in c)
    assert sorted(tuple(r) for r in df.collect()) == expected


def test_a_cached_table_over_connect_is_kept_until_it_changes(connect, caplog):
    """A cached table's driver copy is kept over Connect: the next statement finds it by the
    table's rows (count and hash sums), and a view replaced by another cached DataFrame is told
    apart by them."""
    import logging

    def sssp(edges):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="recsql.executor.state.bases"):
            rows = recsql.sql(
                "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT k_edge.Dst, "
                "path.Cost + k_edge.Cost FROM path, k_edge WHERE path.Dst = k_edge.Src) "
                "SELECT Dst, Cost FROM path", spark=connect).collect()
        graph = nx.DiGraph()
        graph.add_weighted_edges_from(edges)
        assert sorted(tuple(r) for r in rows) == sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
        return any("kept from an earlier statement" in r.getMessage() for r in caplog.records)

    first = connect.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").cache()
    first.createOrReplaceTempView("k_edge")
    assert not sssp(EDGES)
    assert sssp(EDGES)
    changed = [*EDGES, (1, 5, 1)]
    second = connect.createDataFrame(changed, "Src INT, Dst INT, Cost INT").cache()
    second.createOrReplaceTempView("k_edge")
    assert not sssp(changed)
    first.unpersist()
    second.unpersist()


def test_a_file_table_over_connect_is_kept_by_its_files(connect, caplog, tmp_path):
    """Over Connect a table of parquet files is kept by its files: its plan is read from what
    `explain()` prints (`bases.plan_reads`), which a remote session prints too."""
    import logging

    path = str(tmp_path / "f_edge")
    connect.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.parquet(path)
    connect.read.parquet(path).createOrReplaceTempView("f_edge")
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    expected = sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
    kept = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="recsql.executor.state.bases"):
            rows = recsql.sql(
                "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT f_edge.Dst, "
                "path.Cost + f_edge.Cost FROM path, f_edge WHERE path.Dst = f_edge.Src) "
                "SELECT Dst, Cost FROM path", spark=connect).collect()
        assert sorted(tuple(r) for r in rows) == expected
        kept.append(any("kept from an earlier statement" in r.getMessage() for r in caplog.records))
    assert kept == [False, True]


def test_dataframe_keyword_argument_over_connect(connect):
    edges = connect.createDataFrame([(1, 2), (2, 3), (3, 1), (5, 6)], "a INT, b INT")
    df = recsql.sql(
        "WITH recursive reach (X) AS (SELECT 1) UNION (SELECT e.b FROM reach, {edges} e "
        "WHERE reach.X = e.a) SELECT X FROM reach",
        spark=connect, edges=edges,
    )
    assert sorted(r[0] for r in df.collect()) == [1, 2, 3]


def test_user_error_over_connect_is_a_recsql_error(connect):
    with pytest.raises(recsql.RecSQLError) as caught:
        recsql.sql("WITH recursive r (X) AS (SELECT 1) UNION (SELECT nosuch.b FROM r, nosuch "
                   "WHERE r.X = nosuch.a) SELECT * FROM r", spark=connect)
    assert "nosuch" in str(caught.value)


def test_state_partitions_over_connect_are_capped_at_one_per_task_slot(connect):
    """Connect reports no SparkContext; the server's local[2] is read off a range's split, so a
    session at Spark's default 200 shuffle partitions keeps its state in 2 (AQE is off in the
    iterations, so nothing else would coalesce 200)."""
    from pyspark.sql import functions as F

    edges = [(0, i) for i in range(1, 13)]  # a star: 13 keys in two iterations (a chain took 13)
    connect.createDataFrame(edges, "Src INT, Dst INT").createOrReplaceTempView("star_edge")
    connect.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        result = recsql.run(
            "WITH recursive reach (X) AS (SELECT 0) UNION (SELECT star_edge.Dst FROM reach, star_edge "
            "WHERE reach.X = star_edge.Src) SELECT X FROM reach",
            spark=connect, conf={"spark.recsql.endgame.enabled": "false"},
        )
        # the final query projects the state, so its rows stay in the state's partitions
        last = result.df.select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]
        assert connect.conf.get("spark.sql.shuffle.partitions") == "200"  # restored
    finally:
        connect.conf.set("spark.sql.shuffle.partitions", "4")
    assert sorted(r[0] for r in result.df.collect()) == list(range(13))
    assert {s.ran_on for s in result.stats} == {"spark"}
    assert last < 2  # 13 keys hashed over 200 (or 4) partitions would reach beyond partition 1


def test_recsql_serve_over_connect_sends_every_type_and_its_nulls(connect):
    """`recsql serve` on a Connect session: a result collected as Arrow through Connect, more
    than one fetch of PyHive's, nulls in every other row; the values are the hand-written ones."""
    from pyhive import hive

    from tests.server.test_results import COLUMNS, TYPED_ROW

    rows = 2_500
    select = ", ".join(f"IF(id % 2 = 1, NULL, {expr}) AS {name}" for expr, name, _ in COLUMNS)
    with recsql.serve(spark=connect, port=0) as server:
        connection = hive.Connection(host="127.0.0.1", port=server.port, auth="NOSASL")
        try:
            cur = connection.cursor()
            cur.arraysize = 1_000
            cur.execute("SET spark.sql.session.timeZone=UTC")
            cur.execute(f"SELECT id, {select} FROM range({rows}) ORDER BY id")
            got = cur.fetchall()
        finally:
            connection.close()
    nulls = (None,) * len(TYPED_ROW)
    assert [row[0] for row in got] == list(range(rows))
    assert all(row[1:] == (nulls if row[0] % 2 else TYPED_ROW) for row in got)


def test_recursive_views_over_connect(connect):
    """A stored recursive view is made and read with Connect's APIs too; plain Spark refuses it."""
    connect.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.mode("overwrite") \
        .saveAsTable("connect_edge")
    sssp = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT e.Dst, "
            "path.Cost + e.Cost FROM path, connect_edge e WHERE path.Dst = e.Src) SELECT Dst, Cost FROM path")
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    expected = sorted(nx.single_source_dijkstra_path_length(graph, 1).items())
    try:
        recsql.sql("CREATE OR REPLACE VIEW connect_sp AS " + sssp, spark=connect)
        recsql.sql("CREATE OR REPLACE TEMP VIEW connect_tmp AS SELECT * FROM connect_sp WHERE Cost > 2",
                   spark=connect)
        assert sorted(tuple(r) for r in recsql.sql("SELECT * FROM connect_sp", spark=connect).collect()) \
            == expected
        assert sorted(tuple(r) for r in recsql.sql("SELECT * FROM connect_tmp", spark=connect).collect()) \
            == [(d, c) for d, c in expected if c > 2]
        for name in ("connect_sp", "connect_tmp"):
            with pytest.raises(Exception, match="RECSQL_RECURSIVE_VIEW"):
                connect.sql(f"SELECT count(*) FROM {name}").collect()
    finally:
        connect.sql("DROP VIEW IF EXISTS connect_tmp")
        connect.sql("DROP VIEW IF EXISTS connect_sp")
        connect.sql("DROP TABLE IF EXISTS connect_edge")
