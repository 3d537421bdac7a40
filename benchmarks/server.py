"""`recsql serve` overheads: time to first row of a trivial query over the server (PyHive, binary
without SASL) against `recsql.sql` in-process, and the fetch throughput of 1,000,000 rows.

    python -m benchmarks.server --runs 5 --out benchmarks/SERVER.md

Runs interleaved after a warm-up; medians with min-max. The machine and load go beside the
figures. Not a test: timings on a shared 2-core machine vary.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

ROWS = 1_000_000
TRIVIAL = "SELECT 1 AS one"
WIDE = f"SELECT id, id * 2 AS twice, CAST(id AS STRING) AS s FROM range({ROWS})"


def spark_session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("recsql-bench-server")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def first_row_in_process(spark) -> float:
    import recsql

    started = time.perf_counter()
    assert recsql.sql(TRIVIAL, spark=spark).first()[0] == 1
    return time.perf_counter() - started


def first_row_over_server(cursor) -> float:
    started = time.perf_counter()
    cursor.execute(TRIVIAL)
    assert cursor.fetchone() == (1,)
    return time.perf_counter() - started


def fetch_over_server(cursor, batch: int) -> float:
    cursor.arraysize = batch
    started = time.perf_counter()
    cursor.execute(WIDE)
    count = 0
    while rows := cursor.fetchmany(batch):
        count += len(rows)
    assert count == ROWS
    return time.perf_counter() - started


def fetch_in_process(spark) -> float:
    import recsql

    started = time.perf_counter()
    count = sum(1 for _ in recsql.sql(WIDE, spark=spark).toLocalIterator(prefetchPartitions=True))
    assert count == ROWS
    return time.perf_counter() - started


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=10_000, help="client fetch size")
    parser.add_argument("--out", default="benchmarks/SERVER.md")
    args = parser.parse_args()

    import pyhive
    import pyspark
    from pyhive import hive

    import recsql

    spark = spark_session()
    load_before = os.getloadavg()
    with recsql.serve(spark=spark, port=0) as server:
        connection = hive.Connection(host="127.0.0.1", port=server.port, auth="NOSASL")
        cursor = connection.cursor()
        first_row_in_process(spark), first_row_over_server(cursor)  # warm-up
        fetch_in_process(spark), fetch_over_server(cursor, args.batch)
        local, remote, local_fetch, remote_fetch = [], [], [], []
        for run in range(args.runs):
            pairs = [(local, lambda: first_row_in_process(spark)),
                     (remote, lambda: first_row_over_server(cursor))]
            for target, measure in pairs if run % 2 == 0 else reversed(pairs):
                target.append(measure())
        for run in range(args.runs):
            pairs = [(local_fetch, lambda: fetch_in_process(spark)),
                     (remote_fetch, lambda: fetch_over_server(cursor, args.batch))]
            for target, measure in pairs if run % 2 == 0 else reversed(pairs):
                target.append(measure())
        started = time.perf_counter()
        hive.Connection(host="127.0.0.1", port=server.port, auth="NOSASL").close()
        connect_seconds = time.perf_counter() - started
        connection.close()
    load_after = os.getloadavg()
    spark.stop()

    rate = [ROWS / s for s in remote_fetch]
    local_rate = [ROWS / s for s in local_fetch]
    text = f"""# `recsql serve`: time to first row and fetch throughput

- command: `python -m benchmarks.server --runs {args.runs} --batch {args.batch} --out {args.out}`
- machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()},
  pyspark {pyspark.__version__}, PyHive {getattr(pyhive, '__version__', '0.7')}, Spark `local[2]`
- load average before / after: {' / '.join(f'{x:.2f}' for x in load_before)} /
  {' / '.join(f'{x:.2f}' for x in load_after)}
- {args.runs} runs each after a warm-up, interleaved (order alternating); median (min-max)

| | in-process (`recsql.sql`) | over the server (PyHive, binary, no SASL) |
|---|--:|--:|
| time to first row of `{TRIVIAL}`, s | {summary(local)} | {summary(remote)} |
| {ROWS:,} rows (bigint, bigint, string), s | {summary(local_fetch)} | {summary(remote_fetch)} |
| rows/s | {statistics.median(local_rate):,.0f} | {statistics.median(rate):,.0f} |

- in-process: `recsql.sql(...).first()` and `sum(1 for _ in df.toLocalIterator())`; over the
  server: `cursor.execute` then `fetchone()`, and `fetchmany({args.batch})` until empty (each a
  `FetchResults` of {args.batch} rows in the column-based row set).
- opening a connection and session (`hive.Connection`, NOSASL, incl. `USE default`):
  {connect_seconds:.3f} s.
- The server encodes with Thrift's pure-Python binary protocol (PyHive's generated TCLIService
  modules predate the C accelerator's spec format); the client decodes with it too.
"""
    with open(args.out, "w") as stream:
        stream.write(text)
    print(text)


if __name__ == "__main__":
    main()
