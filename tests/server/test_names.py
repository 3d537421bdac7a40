"""Qualified table names over the server, as dbt's `{{ ref() }}` writes them (`analytics.edges`).

The schema's table holds the shared graph reversed, so a name resolved to the session's `edge`
view would give other rows; the oracle is networkx over the rows Spark reads through the name."""

from __future__ import annotations

import oracles
import pytest
from pyhive.exc import OperationalError

from tests.server.clients import EDGES, cursor

DB = "srv_names"
REVERSED = sorted((d, s, c) for s, d, c in EDGES)
QUERY = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT e.dst, path.Cost + e.cost FROM path, {T} WHERE path.Dst = e.src)
SELECT Dst, Cost FROM path"""


@pytest.fixture(scope="module")
def schema(server):
    with cursor(server) as cur:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DB}")
        cur.execute(f"CREATE TABLE {DB}.edges (src INT, dst INT, cost INT) USING parquet")
        cur.execute(f"INSERT INTO {DB}.edges VALUES " + ", ".join(f"({s}, {d}, {c})" for s, d, c in REVERSED))
    yield
    with cursor(server) as cur:
        cur.execute(f"DROP SCHEMA {DB} CASCADE")


@pytest.mark.parametrize("reference,database", [
    (f"{DB}.edges e", "default"),
    (f"`{DB}`.`edges` AS e", "default"),  # dbt-spark's quoting
    (f"spark_catalog.{DB}.edges e", "default"),
    ("edges AS e", DB),  # the connection's database (USE)
])
def test_recursive_query_reads_the_named_table(server, schema, reference, database):
    with cursor(server, database=database) as cur:
        cur.execute(f"SELECT e.src, e.dst, e.cost FROM {reference}")
        edges = cur.fetchall()
        assert sorted(edges) == REVERSED
        cur.execute(QUERY.replace("{T}", reference))
        assert sorted(cur.fetchall()) == sorted(oracles.dijkstra(edges, 1).items())


def test_qualified_target_read_from_a_new_connection(server, schema):
    with cursor(server) as cur:
        cur.execute(f"CREATE TABLE `{DB}`.`sssp` USING parquet AS " + QUERY.replace("{T}", f"`{DB}`.`edges` e"))
        cur.execute(f"INSERT INTO {DB}.sssp " + QUERY.replace("{T}", f"{DB}.edges e"))
    with cursor(server) as cur:
        cur.execute(f"SELECT Dst, Cost FROM {DB}.sssp")
        assert sorted(cur.fetchall()) == sorted(list(oracles.dijkstra(REVERSED, 1).items()) * 2)


def test_missing_qualified_table(server, schema):
    with cursor(server) as cur, pytest.raises(OperationalError) as info:
        cur.execute(QUERY.replace("{T}", f"{DB}.edgez e"))
    text = str(info.value)
    assert "TABLE_OR_VIEW_NOT_FOUND" in text and f"`{DB}`.`edgez`" in text
    assert "(line 2, pos 53)" in text and "has )" not in text  # where `srv_names.edgez` starts
