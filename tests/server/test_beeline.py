"""The real Hive JDBC client: beeline from the installed pyspark (Hive JDBC 2.3), one JVM per
transport, each running a script."""

from __future__ import annotations

from tests.server.clients import SSSP, beeline, csv_rows, output_lines, sssp_oracle

SCRIPT = f"{SSSP};\n"


def test_beeline_sasl_plain_with_url_settings_tables_and_columns(server, spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS beelinedb")
    try:
        url = (f"jdbc:hive2://127.0.0.1:{server.port}/beelinedb"
               "?spark.recsql.maxIterations=777")  # use:database and set:hiveconf
        script = SCRIPT + "SELECT current_database() AS db;\nSET spark.recsql.maxIterations;\n" \
            "!tables\n!columns edge\n"
        out = beeline(url, script)
    finally:
        spark.sql("DROP DATABASE IF EXISTS beelinedb CASCADE")
    assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out
    lines = output_lines(out)
    assert lines[lines.index("db") + 1] == "beelinedb", out
    assert "spark.recsql.maxIterations,777" in lines, out
    assert any(line.endswith(",edge,VIEW,") for line in lines), out  # !tables: the temp view
    columns = [line.split(",") for line in lines if ",edge," in line and line.count(",") > 10]
    assert [(c[3], c[4], c[5]) for c in columns] == [("Src", "4", "INT"), ("Dst", "4", "INT"),
                                                     ("Cost", "4", "INT")], out


def test_beeline_no_sasl(server):
    out = beeline(f"jdbc:hive2://127.0.0.1:{server.port}/default;auth=noSasl", SCRIPT)
    assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out
