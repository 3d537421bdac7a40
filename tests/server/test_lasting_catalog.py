"""Recursive views and tables created over the server: read from other connections, listed by
the metadata calls, and (with the Hive metastore `recsql serve` starts by default) still there
after a restart. Rows are checked against networkx; the client is PyHive."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from TCLIService import ttypes

from tests.server.clients import EDGES, connect, cursor, wait_for
from tests.server.test_metadata import fetch

SSSP_OVER = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT e.Dst, path.Cost + e.Cost FROM path, {table} e WHERE path.Dst = e.Src)
SELECT Dst, Cost FROM path"""
VALUES = ", ".join(f"({s}, {d}, {c})" for s, d, c in EDGES)


def oracle(edges=EDGES, source: int = 1) -> list[tuple[int, int]]:
    import networkx as nx

    graph = nx.DiGraph()
    for s, d, c in edges:
        if not graph.has_edge(s, d) or graph[s][d]["weight"] > c:
            graph.add_edge(s, d, weight=c)
    return sorted(nx.single_source_dijkstra_path_length(graph, source).items())


def read(cur, sql: str) -> list[tuple]:
    cur.execute(sql)
    return sorted(tuple(r) for r in cur.fetchall())


@pytest.fixture
def edges_table(server, spark):
    spark.sql("DROP TABLE IF EXISTS srv_edges")
    with cursor(server) as cur:
        cur.execute("CREATE TABLE srv_edges (Src INT, Dst INT, Cost INT) USING parquet")
        cur.execute(f"INSERT INTO srv_edges VALUES {VALUES}")
    yield "srv_edges"
    spark.sql("DROP VIEW IF EXISTS srv_sp")
    spark.sql("DROP TABLE IF EXISTS srv_edges")


def test_a_recursive_view_from_one_connection_is_read_and_listed_by_another(server, edges_table):
    with cursor(server) as cur:
        cur.execute("CREATE VIEW srv_sp AS " + SSSP_OVER.format(table=edges_table))
    connection = connect(server)
    try:
        cur = connection.cursor()
        assert read(cur, "SELECT * FROM srv_sp") == oracle()
        assert read(cur, "SELECT count(*) FROM default.srv_sp WHERE Cost > 5") == [
            (sum(1 for _, c in oracle() if c > 5),)]
        cur.execute("SHOW TABLES")
        assert ("default", "srv_sp", False) in {tuple(r) for r in cur.fetchall()}
        cur.execute("DESCRIBE srv_sp")
        assert [tuple(r[:2]) for r in cur.fetchall()] == [("Dst", "int"), ("Cost", "int")]
        client, session = connection.client, connection.sessionHandle
        tables = fetch(client, client.GetTables(ttypes.TGetTablesReq(session, None, "default", "srv_sp")))
        assert [(t["TABLE_SCHEM"], t["TABLE_NAME"], t["TABLE_TYPE"]) for t in tables] == [
            ("default", "srv_sp", "VIEW")]
        columns = fetch(client, client.GetColumns(ttypes.TGetColumnsReq(session, None, "default", "srv_sp")))
        assert [(c["COLUMN_NAME"], c["DATA_TYPE"], c["TYPE_NAME"], c["ORDINAL_POSITION"]) for c in columns] \
            == [("Dst", 4, "INT", 1), ("Cost", 4, "INT", 2)]
    finally:
        connection.close()


def test_a_temp_recursive_view_belongs_to_its_connection(server, edges_table):
    with cursor(server) as mine, cursor(server) as other:
        mine.execute("CREATE TEMP VIEW srv_mine AS " + SSSP_OVER.format(table=edges_table))
        assert read(mine, "SELECT * FROM srv_mine") == oracle()
        with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
            other.execute("SELECT * FROM srv_mine")


# ------------------------------------------------------------------- restarts (own processes)

def start(workdir, *args: str) -> tuple[subprocess.Popen, int, list[str]]:
    """`recsql serve` in `workdir` (its own Spark, Hive metastore there); its port and the
    lines it wrote to stderr before listening."""
    process = subprocess.Popen(
        [sys.executable, "-c", "from recsql.cli import main; main()", "serve", "--port", "0",
         "--master", "local[1]", "-c", "spark.ui.enabled=false", *args],
        stderr=subprocess.PIPE, text=True, cwd=workdir)
    lines = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        assert line, "recsql serve exited before listening:\n" + "".join(lines)
        lines.append(line)
        if match := re.search(r"listening on 127\.0\.0\.1:(\d+)", line):
            return process, int(match.group(1)), lines
    raise AssertionError("recsql serve did not listen within 300 s")


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert wait_for(lambda: process.poll() is not None, 120, 0.2) and process.returncode == 0


def open_connection(port: int):
    from pyhive import hive

    return hive.Connection(host="127.0.0.1", port=port, auth="NOSASL")


@pytest.mark.slow
def test_tables_views_and_recursive_views_survive_a_restart(tmp_path):
    process, port, lines = start(tmp_path)
    try:
        assert any("hive catalog ready" in line for line in lines), lines
        connection = open_connection(port)
        cur = connection.cursor()
        cur.execute("CREATE TABLE edges (Src INT, Dst INT, Cost INT) STORED AS PARQUET")
        cur.execute(f"INSERT INTO edges VALUES {VALUES}")
        cur.execute("CREATE TABLE hive_default AS SELECT Src, Dst FROM edges WHERE Cost < 5")
        cur.execute("CREATE TABLE sp_table AS " + SSSP_OVER.format(table="edges"))
        cur.execute("CREATE VIEW cheap AS SELECT * FROM edges WHERE Cost < 5")
        cur.execute("CREATE VIEW sp AS " + SSSP_OVER.format(table="edges"))
        cur.execute("CREATE VIEW sp_cheap AS " + SSSP_OVER.format(table="cheap"))
        cur.execute("CREATE VIEW far AS SELECT Dst FROM sp WHERE Cost > 5")
        connection.close()
    finally:
        stop(process)

    process, port, lines = start(tmp_path)
    try:
        connection = open_connection(port)
        cur = connection.cursor()
        cheap = [e for e in EDGES if e[2] < 5]
        assert read(cur, "SELECT * FROM edges") == sorted(EDGES)
        assert read(cur, "SELECT * FROM hive_default") == sorted((s, d) for s, d, _ in cheap)
        assert read(cur, "SELECT * FROM sp_table") == oracle()
        assert read(cur, "SELECT * FROM cheap") == sorted(cheap)
        assert read(cur, "SELECT * FROM sp") == oracle()
        assert read(cur, "SELECT * FROM sp_cheap") == oracle(cheap)
        assert read(cur, "SELECT * FROM far") == sorted((d,) for d, c in oracle() if c > 5)
        cur.execute("DESCRIBE sp")
        assert [tuple(r[:2]) for r in cur.fetchall()] == [("Dst", "int"), ("Cost", "int")]
        connection.close()
    finally:
        stop(process)

    # Spark without recsql, on the same metastore: the recursive view refuses to be read
    plain = textwrap.dedent("""
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .enableHiveSupport().getOrCreate())
        print("edges", spark.table("edges").count())
        for query in ["SELECT * FROM sp", "SELECT count(*) FROM sp", "SELECT 1 FROM far LIMIT 1"]:
            try:
                spark.sql(query).collect()
                print("ANSWERED", query)
            except Exception as error:
                print("REFUSED", query, "RECSQL_RECURSIVE_VIEW" in str(error))
    """)
    done = subprocess.run([sys.executable, "-c", plain], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYSPARK_SUBMIT_ARGS": "pyspark-shell"})
    assert f"edges {len(EDGES)}" in done.stdout, done.stdout + done.stderr[-3000:]
    assert done.stdout.count("REFUSED") == 3 and "False" not in done.stdout, done.stdout
