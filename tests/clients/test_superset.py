"""Apache Superset 6.1 (its own virtualenv, SQLite metadata database, gunicorn on 127.0.0.1)
against `recsql serve`, through Superset's REST API: a database `hive+recsql://` (recsql's
SQLAlchemy dialect under Superset's Hive engine spec), its table list, recursive queries in SQL
Lab, saved as virtual datasets and read through the chart-data API; a CREATE TABLE through SQL
Lab. Rows are compared with networkx on the dbt seed's CSV."""

from __future__ import annotations

import networkx as nx
import pytest

from tests.clients import oracles

pytestmark = [pytest.mark.clients, pytest.mark.timeout(2400)]  # the first test pays for the set-up

SCHEMA = "analytics"

# Each query needs one feature at most beyond standard recursion (see the ids)
QUERIES = {
    # standard WITH RECURSIVE ... UNION ALL, bounded by depth (recsql hands it to Spark's own
    # recursion): Superset sends sqlglot's Hive regeneration, which drops the word RECURSIVE
    "standard": """WITH RECURSIVE walk (node, depth) AS (
  SELECT 1, 0
  UNION ALL
  SELECT e.dst, w.depth + 1 FROM walk w JOIN edges e ON w.node = e.src WHERE w.depth < 3)
SELECT node, MIN(depth) AS hops FROM walk GROUP BY node""",
    # the nodes reachable from 1 by set recursion (UNION: recsql's, Spark's own refuses it) over a
    # schema-qualified table, run with another current database (branch `names`)
    "qualified": """WITH RECURSIVE reach (node) AS (
  SELECT 1
  UNION
  SELECT e.dst FROM reach r JOIN analytics.edges e ON r.node = e.src)
SELECT node FROM reach""",
    # shortest paths with the aggregate in the recursive term, the spelling sqlglot parses
    # (branch `spelling`; RaSQL's head `min() AS cost` gets Superset's 422 parse error)
    "min-group-by": """WITH RECURSIVE path (node, cost) AS (
  SELECT 1, 0
  UNION
  SELECT e.dst, MIN(p.cost + e.cost) FROM path p JOIN edges e ON p.node = e.src GROUP BY e.dst)
SELECT node, cost FROM path""",
}


CURRENT = {"qualified": "default"}  # the SQL Lab schema (current database) of a query if not SCHEMA
COLUMNS = {"standard": ("node", "hops"), "qualified": ("node",), "min-group-by": ("node", "cost")}


def expected(name: str) -> list[tuple]:
    if name == "min-group-by":
        return oracles.shortest_paths()
    if name == "qualified":
        return oracles.reachable()
    return [(node, hops) for node, hops in oracles.hops() if hops <= 3]


@pytest.fixture(scope="module")
def superset(recsql_server, tmp_path_factory):
    from tests.clients.superset import Superset, SupersetAPI

    connection, cursor = recsql_server.cursor()
    try:
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        cursor.execute(f"CREATE TABLE {SCHEMA}.edges (src INT, dst INT, cost INT) USING parquet")
        values = ", ".join(f"({s}, {d}, {c})" for s, d, c in oracles.edges())
        cursor.execute(f"INSERT INTO {SCHEMA}.edges VALUES {values}")
    finally:
        connection.close()
    app = Superset(tmp_path_factory.mktemp("superset")).set_up()
    try:
        api = SupersetAPI(app.start().url)
        database = api.add_database("recsql", f"hive+recsql://analyst@127.0.0.1:{recsql_server.port}/{SCHEMA}")
        yield api, database
    finally:
        app.stop()


def rows(data: list[dict], columns: tuple[str, str]) -> list[tuple]:
    return sorted(tuple(row[c] for c in columns) for row in data)


def test_table_list_shows_tables(superset):
    api, database = superset
    names = {(t["type"], t["value"]) for t in api.tables(database, SCHEMA)}
    assert ("table", "edges") in names and not {n for _, n in names} & {SCHEMA, ""}, names


@pytest.mark.parametrize("name", QUERIES)
def test_recursive_query_in_sql_lab(superset, name):
    api, database = superset
    answer = api.sql_lab(database, CURRENT.get(name, SCHEMA), QUERIES[name])
    assert answer["status"] == "success", answer
    assert rows(answer["data"], tuple(c["column_name"] for c in answer["columns"])) == expected(name)


@pytest.mark.parametrize("name", QUERIES)
def test_virtual_dataset_through_chart_data(superset, name):
    api, database = superset
    dataset = api.add_dataset(database, CURRENT.get(name, SCHEMA), f"recursive_{name.replace('-', '_')}", QUERIES[name])
    assert rows(api.chart_data(dataset, list(COLUMNS[name])), COLUMNS[name]) == expected(name)


def test_create_table_as_recursive_query_in_sql_lab(superset, recsql_server):
    """Superset's Hive dialect rewrites `USING parquet` into `STORED AS PARQUET`; recsql writes a
    recursive query's table itself."""
    api, database = superset
    answer = api.sql_lab(database, SCHEMA, f"CREATE TABLE {SCHEMA}.walks USING parquet AS {QUERIES['standard']}")
    assert answer["status"] == "success", answer
    assert sorted(recsql_server.query(f"SELECT node, hops FROM {SCHEMA}.walks")) == expected("standard")


def test_recursive_query_over_a_table_created_in_sql_lab(superset):
    """A plain CREATE TABLE ... USING parquet AS SELECT reaches Spark as `STORED AS PARQUET`, a
    Hive table: it needs the server's Hive support (branch `views`)."""
    api, database = superset
    answer = api.sql_lab(database, SCHEMA, f"CREATE TABLE {SCHEMA}.cheap_edges USING parquet AS "
                                           "SELECT src, dst FROM edges WHERE cost <= 5")
    assert answer["status"] == "success", answer
    answer = api.sql_lab(database, SCHEMA, QUERIES["qualified"].replace("analytics.edges", "cheap_edges"))
    assert answer["status"] == "success", answer
    graph = nx.DiGraph((s, d) for s, d, c in oracles.edges() if c <= 5)
    graph.add_node(oracles.SOURCE)
    reached = nx.descendants(graph, oracles.SOURCE) | {oracles.SOURCE}
    assert rows(answer["data"], ("node",)) == sorted((n,) for n in reached)
