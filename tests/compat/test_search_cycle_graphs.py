"""SEARCH and CYCLE over generated graphs (cycles, self-loops, diamonds, several anchors), with
a real PostgreSQL as the oracle; also in a view, under UNION, and over `recsql serve`."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from conftest import unique_name
from postgres import pg_text, postgres  # noqa: F401 (the session fixture)

import recsql
from recsql import RecSQLError

RECORD, RECORD_ARRAY = 2249, 2287  # PostgreSQL's type oids, read as PostgreSQL prints them


def _graphs() -> dict[str, list[tuple[int, int]]]:
    rng = random.Random(28)
    generated = sorted({(rng.randrange(7), rng.randrange(7)) for _ in range(13)})
    return {
        # a self-loop, a 2-cycle and a diamond 1 -> {2, 3} -> 4 that leads on to a 3-cycle
        "shapes": [(1, 1), (1, 2), (2, 1), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6), (6, 4)],
        "random": generated,
    }


GRAPHS = _graphs()

# {g}: the graph's table; anchors: the edges out of 1 and out of 3 (two anchors, one of them
# also reached by recursion)
QUERIES = {
    "depth_first_cycle": """
        WITH RECURSIVE walk(f, t) AS (
            SELECT f, t FROM {g} WHERE f IN (1, 3)
          UNION ALL
            SELECT e.f, e.t FROM {g} e, walk w WHERE e.f = w.t
        ) SEARCH DEPTH FIRST BY f, t SET seq
          CYCLE f, t SET is_cycle USING path
        SELECT * FROM walk ORDER BY seq""",
    "breadth_first_cycle_on_node": """
        WITH RECURSIVE walk(node, hops) AS (
            SELECT t, 1 FROM {g} WHERE f IN (1, 3)
          UNION ALL
            SELECT e.t, w.hops + 1 FROM {g} e JOIN walk w ON e.f = w.node
        ) SEARCH BREADTH FIRST BY node SET seq
          CYCLE node SET looped TO 'Y' DEFAULT 'N' USING trail
        SELECT * FROM walk ORDER BY seq""",
    "set_union_cycle": """
        WITH RECURSIVE walk(node) AS (
            SELECT t FROM {g} WHERE f = 1
          UNION
            SELECT e.t FROM walk w, {g} e WHERE e.f = w.node
        ) CYCLE node SET is_cycle USING path
        SELECT node, is_cycle, path FROM walk""",
}


@pytest.fixture(scope="module")
def pg(postgres, spark):  # noqa: F811
    con = postgres.connect()
    for oid in (RECORD, RECORD_ARRAY):
        con.register_in_adapter(oid, str)
    for name, edges in GRAPHS.items():
        con.run(f"create table {name} (f int, t int)")
        for f, t in edges:
            con.run(f"insert into {name} values (:f, :t)", f=f, t=t)
        spark.createDataFrame(edges, "f INT, t INT").createOrReplaceTempView(name)
    yield con
    con.close()


def _pg_rows(con, statement: str) -> tuple[list[str], list[tuple]]:
    data = con.run(statement)
    return [c["name"] for c in con.columns], [tuple(pg_text(v) for v in row) for row in data]


def _recsql_rows(statement: str, spark) -> tuple[list[str], list[tuple]]:
    df = recsql.sql(statement, spark=spark)
    return [c.lower() for c in df.columns], [tuple(pg_text(v) for v in row) for row in df.collect()]


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_generated_graph(graph, query, pg, spark):
    statement = QUERIES[query].format(g=graph)
    names, expected = _pg_rows(pg, statement)
    got_names, got = _recsql_rows(statement, spark)
    assert got_names == names
    assert Counter(got) == Counter(expected)
    if "ORDER BY seq" in statement:  # seq orders as PostgreSQL's records and arrays of records
        seq = names.index("seq")
        assert [r[seq] for r in got] == [r[seq] for r in expected]


def test_in_a_view_read_with_a_filter(pg, spark):
    body = QUERIES["depth_first_cycle"].format(g="shapes")
    view = unique_name("walks")
    recsql.sql(f"CREATE OR REPLACE TEMP VIEW {view} AS {body}", spark=spark)
    reading = "SELECT f, t, is_cycle FROM {v} WHERE is_cycle"
    _, expected = _pg_rows(pg, reading.format(v=f"({body}) AS v"))
    _, got = _recsql_rows(reading.format(v=view), spark)
    assert expected and Counter(got) == Counter(expected)


def test_over_the_server(pg, spark):
    from tests.server.clients import cursor

    def register(session):
        session.createDataFrame(GRAPHS["shapes"], "f INT, t INT").createOrReplaceTempView("shapes")

    statement = ("WITH RECURSIVE walk(f, t) AS (SELECT f, t FROM shapes WHERE f = 1 UNION ALL "
                 "SELECT e.f, e.t FROM shapes e, walk w WHERE e.f = w.t) "
                 "CYCLE f, t SET is_cycle USING path SELECT f, t, is_cycle FROM walk")
    _, expected = _pg_rows(pg, statement)
    with recsql.serve(spark=spark, port=0, init=register, handshake_timeout=30) as server, \
            cursor(server) as cur:
        cur.execute(statement)
        got = [tuple(pg_text(v) for v in row) for row in cur.fetchall()]
    assert Counter(got) == Counter(expected)


@pytest.mark.parametrize(("clause", "reading", "operator"), [
    ("SEARCH DEPTH FIRST BY n, m SET seq", "SELECT n FROM r ORDER BY seq", "an ordering"),
    ("SEARCH BREADTH FIRST BY m SET seq", "SELECT n FROM r", "an ordering"),
    ("CYCLE m SET c USING p", "SELECT n FROM r", "an equality"),
])
def test_a_column_spark_cannot_order_or_compare(clause, reading, operator, spark):
    """A MAP column can be neither ordered nor compared by Spark (PostgreSQL's words: no equality
    or ordering operator): refused when the anchor is typed, before any recursive term runs, at
    the column as written in the clause."""
    statement = ("WITH RECURSIVE r(n, m) AS (SELECT 1, map(1, 2) UNION ALL "
                 f"SELECT n + 1, m FROM r WHERE n < 3) {clause} {reading}")
    with pytest.raises(RecSQLError) as info:
        recsql.sql(statement, spark=spark).collect()
    err = info.value
    assert err.condition == "RECSQL_SEARCH_CYCLE"
    assert f"could not identify {operator} operator for type map<int,int>" in err.message
    written = statement.index(clause) + clause.index(" m ") + 1  # the clause's `m`, by hand
    assert (err.line, err.pos) == (1, written), str(err)


def test_a_map_only_the_recursive_term_gives_is_refused_too(spark):
    """The anchor's NULL says nothing of the column's type; the widened type is checked as well."""
    statement = ("WITH RECURSIVE r(n, m) AS (SELECT 1, NULL UNION ALL SELECT n + 1, map(1, 2) FROM r "
                 "WHERE n < 3) SEARCH BREADTH FIRST BY m SET seq SELECT n FROM r ORDER BY seq")
    with pytest.raises(RecSQLError) as info:
        recsql.sql(statement, spark=spark).collect()
    err = info.value
    assert err.condition == "RECSQL_SEARCH_CYCLE"
    assert "could not identify an ordering operator for type map<int,int>" in err.message
    assert (err.line, err.pos) == (1, statement.index("BY m SET") + 3), str(err)
