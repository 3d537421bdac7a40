"""The real Hive JDBC client: beeline from the installed pyspark (Hive JDBC 2.3), one JVM per
transport, each running a script."""

from __future__ import annotations

from tests.server.clients import SSSP, beeline, csv_rows, sssp_oracle

SCRIPT = f"{SSSP};\n"


def test_beeline_sasl_plain(server):
    out = beeline(f"jdbc:hive2://127.0.0.1:{server.port}/default", SCRIPT)
    assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out


def test_beeline_no_sasl(server):
    out = beeline(f"jdbc:hive2://127.0.0.1:{server.port}/default;auth=noSasl", SCRIPT)
    assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out
