"""Malformed input data: Spark's documented semantics (PERMISSIVE CSV reading, NULL never equal
in a join, NULLs grouped together), never a wrong answer; or a clear error."""

from __future__ import annotations

import pytest

import recsql

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""


def sql_sssp(edges, source):
    """Plain-Python SSSP with SQL's NULL rules: a NULL node is reachable but joins nothing, a
    NULL cost makes the path cost NULL (and min() ignores NULLs)."""
    best = {source: 0}
    changed = True
    while changed:
        changed = False
        for src, dst, cost in edges:
            if src is None or src not in best:
                continue
            new = None if cost is None or best[src] is None else best[src] + cost
            old = best.get(dst, "absent")
            if old == "absent":
                best[dst] = new
                changed = True
            elif new is not None and (old is None or new < old):
                best[dst] = new
                changed = True
    return sorted(best.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))


def collect(df):
    return sorted((tuple(r) for r in df.collect()), key=lambda t: (t[0] is None, t[0] or 0))


def test_nulls_in_keys_follow_sql_semantics(spark, view):
    edges = [(1, 2, 3), (2, None, 1), (None, 3, 1), (1, 4, None), (4, 5, 2), (2, 5, 9)]
    view("edge", edges, "Src INT, Dst INT, Cost INT")
    assert collect(recsql.sql(SSSP, spark=spark)) == sql_sssp(edges, 1)


def test_csv_with_bad_rows_reads_permissively(spark, tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("1,2,3\n2,3\n3,x,1\n2,4,1,99\nnot,a,row\n4,5,2\n")
    df = spark.read.schema("Src INT, Dst INT, Cost INT").csv(str(path))  # PERMISSIVE: NULLs
    df.createOrReplaceTempView("edge")
    edges = [tuple(r) for r in df.collect()]
    assert (2, 3, None) in edges and (3, None, 1) in edges  # what Spark documents
    assert collect(recsql.sql(SSSP, spark=spark)) == sql_sssp(edges, 1)


def test_failfast_csv_error_is_reported_not_swallowed(spark, tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("1,2,3\n2,x,1\n")
    spark.read.schema("Src INT, Dst INT, Cost INT").option("mode", "FAILFAST") \
        .csv(str(path)).createOrReplaceTempView("edge")
    with pytest.raises(recsql.RecSQLExecutionError) as caught:
        recsql.sql(SSSP, spark=spark).collect()
    message = str(caught.value)
    assert "MALFORMED" in message.upper() and "`path`" in message and "iteration" in message
    assert "py4j" not in message.lower() and "\tat " not in message
