"""A head aggregate declared over the server is kept in the catalog: another connection uses it,
and so does a recursive view stored with it (rows against a plain-Python fixpoint; PyHive)."""

from __future__ import annotations

from tests.server.clients import cursor

FLAGS = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16)]
LINKS = [(1, 2), (2, 3), (3, 1), (3, 4)]


def oracle() -> list[tuple[int, int]]:
    flags = dict(FLAGS)
    changed = True
    while changed:
        changed = False
        for s, d in LINKS:
            if flags[s] | flags[d] != flags[d]:
                flags[d] |= flags[s]
                changed = True
    return sorted(flags.items())


def test_an_aggregate_declared_over_the_server_serves_other_connections_and_views(server, spark):
    spark.createDataFrame(FLAGS, "node INT, flag BIGINT").write.mode("overwrite").saveAsTable("srv_flags")
    spark.createDataFrame(LINKS, "src INT, dst INT").write.mode("overwrite").saveAsTable("srv_links")
    try:
        with cursor(server) as cur:
            cur.execute("CREATE AGGREGATE srv_bor(a BIGINT, b BIGINT) RETURNS BIGINT IDENTITY 0 RETURN a | b")
            cur.execute("CREATE VIEW srv_flagged AS WITH RECURSIVE r(node, srv_bor() AS flags) AS ("
                        "SELECT node, flag FROM srv_flags UNION "
                        "SELECT l.dst, r.flags FROM r JOIN srv_links l ON r.node = l.src) SELECT * FROM r")
        with cursor(server) as other:
            other.execute("SELECT * FROM srv_flagged")
            assert sorted(tuple(r) for r in other.fetchall()) == oracle()
            other.execute("SELECT srv_bor(5, 2)")  # a Spark function as well
            assert other.fetchall()[0][0] == 7
    finally:
        spark.sql("DROP VIEW IF EXISTS srv_flagged")
        spark.sql("DROP FUNCTION IF EXISTS srv_bor")
        spark.sql("DROP TABLE IF EXISTS srv_flags")
        spark.sql("DROP TABLE IF EXISTS srv_links")
