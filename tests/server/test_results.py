"""Result encoding: column-based row sets fetched in batches of the client's size, every type
Spark's server sends, null bitmaps. Through PyHive and its Thrift client."""

from __future__ import annotations

import datetime
import decimal

import pytest
from TCLIService import ttypes

from tests.server.clients import connect, cursor, wait_for

ROWS = 100_000


def test_100000_rows_arrive_in_batches_of_the_fetch_size(server):
    connection = connect(server)
    try:
        cur = connection.cursor()
        cur.execute(f"SELECT id, CAST(id AS STRING) AS s, IF(id % 7 = 0, NULL, id * 0.5D) AS d "
                    f"FROM range({ROWS})", async_=True)
        handle = cur._operationHandle
        done = (ttypes.TOperationState.FINISHED_STATE, ttypes.TOperationState.ERROR_STATE)
        poll = wait_for(lambda: (p := cur.poll()).operationState in done and p, 120)
        assert poll.operationState == ttypes.TOperationState.FINISHED_STATE
        ids, batches = [], []
        for _ in range(ROWS // 25_000 + 2):
            response = connection.client.FetchResults(ttypes.TFetchResultsReq(
                operationHandle=handle, orientation=ttypes.TFetchOrientation.FETCH_NEXT,
                maxRows=25_000))
            assert response.status.statusCode == ttypes.TStatusCode.SUCCESS_STATUS
            columns = response.results.columns
            batch = columns[0].i64Val.values
            assert response.results.startRowOffset == len(ids)
            batches.append(len(batch))
            if not batch:
                break
            nulls = columns[2].doubleVal.nulls
            for i, value in enumerate(batch):
                assert columns[1].stringVal.values[i] == str(value)
                null = bool(nulls[i >> 3] & (1 << (i & 7))) if i >> 3 < len(nulls) else False
                assert null == (value % 7 == 0)
                assert null or columns[2].doubleVal.values[i] == value * 0.5
            ids.extend(batch)
        assert batches == [25_000] * 4 + [0]  # then an empty row set, as HiveServer2 answers
        assert ids == list(range(ROWS))
    finally:
        connection.close()


def test_types_and_metadata(server):
    query = """SELECT CAST(1 AS TINYINT) AS t, CAST(2 AS SMALLINT) AS s, 3 AS i, 4L AS l,
        CAST(1.5 AS FLOAT) AS f, 2.25D AS d, true AS b, 'héllo' AS str, X'CAFE' AS bin,
        CAST(12.345 AS DECIMAL(10,3)) AS dec, DATE'2024-02-29' AS dt,
        TIMESTAMP'2024-02-29 12:34:56.789' AS ts, array(1, 2) AS arr, map('k', 1) AS m,
        named_struct('a', 1, 'b', 'x') AS st, CAST(NULL AS INT) AS n"""
    with cursor(server) as cur:
        cur.execute(query)
        types = {d[0]: d[1] for d in cur.description}
        assert types == {
            "t": "TINYINT_TYPE", "s": "SMALLINT_TYPE", "i": "INT_TYPE", "l": "BIGINT_TYPE",
            "f": "FLOAT_TYPE", "d": "DOUBLE_TYPE", "b": "BOOLEAN_TYPE", "str": "STRING_TYPE",
            "bin": "BINARY_TYPE", "dec": "DECIMAL_TYPE", "dt": "DATE_TYPE",
            "ts": "TIMESTAMP_TYPE", "arr": "ARRAY_TYPE", "m": "MAP_TYPE", "st": "STRUCT_TYPE",
            "n": "INT_TYPE"}
        assert cur.fetchall() == [(
            1, 2, 3, 4, 1.5, 2.25, True, "héllo", b"\xca\xfe", decimal.Decimal("12.345"),
            "2024-02-29", datetime.datetime(2024, 2, 29, 12, 34, 56, 789000), "[1,2]",
            '{"k":1}', '{"a":1,"b":"x"}', None)]


COLUMNS = [  # (expression, name, its type as a cast target)
    ("CAST(1 AS TINYINT)", "t", "TINYINT"), ("CAST(2 AS SMALLINT)", "s", "SMALLINT"),
    ("3", "i", "INT"), ("4L", "l", "BIGINT"), ("CAST(1.5 AS FLOAT)", "f", "FLOAT"),
    ("2.25D", "d", "DOUBLE"), ("true", "b", "BOOLEAN"), ("'héllo'", "str", "STRING"),
    ("X'CAFE'", "bin", "BINARY"), ("CAST(12.345 AS DECIMAL(10,3))", "dec", "DECIMAL(10,3)"),
    ("DATE'2024-02-29'", "dt", "DATE"), ("TIMESTAMP'2024-02-29 12:34:56.789'", "ts", "TIMESTAMP"),
    ("array(1, 2)", "arr", "ARRAY<INT>"), ("map('k', 1)", "m", "MAP<STRING,INT>"),
    ("named_struct('a', 1, 'b', 'x')", "st", "STRUCT<a:INT,b:STRING>")]
TYPED = ", ".join(f"{expr} AS {name}" for expr, name, _ in COLUMNS)
TYPED_ROW = (1, 2, 3, 4, 1.5, 2.25, True, "héllo", b"\xca\xfe", decimal.Decimal("12.345"),
             "2024-02-29", datetime.datetime(2024, 2, 29, 12, 34, 56, 789000), "[1,2]",
             '{"k":1}', '{"a":1,"b":"x"}')


@pytest.mark.parametrize("incremental", [False, True], ids=["collected", "incremental"])
def test_nulls_in_every_column_type_over_a_spark_job(server, incremental):
    """Every type, null in every other row, from a plan that runs a Spark job (a `range`) and
    spans more than one fetch: the values are the hand-written ones, the nulls where the
    query puts them. Collected as Arrow (the default) and streamed row by row (Spark's
    `incrementalCollect`)."""
    rows = 25_000
    conf = {"spark.sql.thriftServer.incrementalCollect": str(incremental).lower()}
    with cursor(server, configuration=conf) as cur:
        cur.arraysize = 10_000
        cur.execute("SELECT id, " + ", ".join(f"IF(id % 2 = 1, NULL, {expr}) AS {name}"
                                                for expr, name, _ in COLUMNS)
                    + f" FROM range({rows}) ORDER BY id")
        assert [d[0] for d in cur.description] == ["id"] + [name for _, name, _ in COLUMNS]
        got = cur.fetchall()
    assert len(got) == rows
    assert [row[0] for row in got] == list(range(rows))
    nulls = (None,) * len(TYPED_ROW)
    assert all(row[1:] == (nulls if row[0] % 2 else TYPED_ROW) for row in got)


def test_an_all_null_row_and_an_empty_result(server):
    with cursor(server) as cur:
        cur.execute(f"SELECT {TYPED} FROM range(2) WHERE id < 0")
        assert len(cur.description) == len(TYPED_ROW)
        assert cur.fetchall() == []
        cur.execute("SELECT " + ", ".join(f"CAST(NULL AS {cast}) AS {name}"
                                          for _, name, cast in COLUMNS) + " FROM range(1)")
        assert cur.fetchall() == [(None,) * len(TYPED_ROW)]


@pytest.mark.parametrize("incremental", [False, True], ids=["collected", "incremental"])
def test_fetch_first_reads_the_result_again_from_its_first_row(server, incremental):
    conf = {"spark.sql.thriftServer.incrementalCollect": str(incremental).lower()}
    connection = connect(server, configuration=conf)
    try:
        cur = connection.cursor()
        cur.execute("SELECT id, CAST(id AS STRING) AS s FROM range(2500)")

        def fetch(orientation: int, rows: int) -> tuple[int, list[int], list[str]]:
            response = connection.client.FetchResults(ttypes.TFetchResultsReq(
                operationHandle=cur._operationHandle, orientation=orientation, maxRows=rows))
            assert response.status.statusCode == ttypes.TStatusCode.SUCCESS_STATUS
            columns = response.results.columns
            return (response.results.startRowOffset, columns[0].i64Val.values,
                    columns[1].stringVal.values)

        Fetch = ttypes.TFetchOrientation
        assert fetch(Fetch.FETCH_NEXT, 1000) == (0, list(range(1000)), [str(i) for i in range(1000)])
        assert fetch(Fetch.FETCH_NEXT, 1000)[:2] == (1000, list(range(1000, 2000)))
        assert fetch(Fetch.FETCH_FIRST, 3)[:2] == (0, [0, 1, 2])
        assert fetch(Fetch.FETCH_NEXT, 5000)[:2] == (3, list(range(3, 2500)))
        assert fetch(Fetch.FETCH_NEXT, 5000)[:2] == (2500, [])
    finally:
        connection.close()
