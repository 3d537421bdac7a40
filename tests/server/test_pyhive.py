"""PyHive, a maintained HiveServer2 client, against `recsql serve` on 127.0.0.1."""

from __future__ import annotations

from tests.server.clients import SSSP, cursor, sssp_oracle


def test_recursive_query_without_sasl(server):
    with cursor(server) as cur:
        cur.execute(SSSP)
        assert [d[0] for d in cur.description] == ["Dst", "Cost"]
        assert [d[1] for d in cur.description] == ["INT_TYPE", "INT_TYPE"]
        assert sorted(cur.fetchall()) == sssp_oracle()


def test_recursive_query_over_sasl_plain(server):
    with cursor(server, auth="NONE") as cur:  # PyHive's NONE is SASL PLAIN, any password
        cur.execute(SSSP)
        assert sorted(cur.fetchall()) == sssp_oracle()
