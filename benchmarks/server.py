"""`recsql serve` beside Spark's own Thrift server, in one sitting, with the same PyHive client:
the round trip of `SELECT 1`, and 1,000,000 rows of three columns fetched in batches (time to
the first batch, rows per second); then the same through Hive's JDBC driver (`--jdbc-runs`).

    python -m benchmarks server [--runs 5] [--out FILE]

Both servers run as their own processes on 127.0.0.1 (random free ports), each Spark on
`local[2]` with a 2 GB driver, binary transport without SASL:

- recsql: `python -m recsql.cli serve --port N --master local[2]`;
- Spark: `spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 ...
  spark-internal` from the pyspark wheel (SPARK_HOME = pyspark's directory), in a temporary
  working directory of its own (its metastore_db and warehouse).

After a warm-up, the runs alternate between the servers (which goes first alternates too), so
both see the same load; medians with min-max. Not a test: timings on a shared machine vary.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from . import measure

ROWS = 1_000_000
TRIVIAL = "SELECT 1"
WIDE = f"SELECT id, id * 2 AS twice, CAST(id AS STRING) AS s FROM range({ROWS})"
ROOT = Path(__file__).resolve().parent.parent
HIVE_JDBC = "2.3.10 (pyspark's jars)"
SPARK_CONF = ["spark.ui.enabled=false", "spark.ui.showConsoleProgress=false",
              "spark.driver.memory=2g"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}: see {log}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise RuntimeError(f"no server on port {port} after {seconds} s: see {log}")


@contextlib.contextmanager
def started(command: list[str], cwd: Path, port: int, env: dict[str, str]) -> Iterator[None]:
    """Run a server process in its own process group; stop that group on the way out."""
    log = cwd / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        wait_for_port(port, process, log)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def recsql_command(port: int) -> list[str]:
    conf = [arg for setting in SPARK_CONF for arg in ("-c", setting)]
    return [sys.executable, "-c", "from recsql.cli import main; main()", "serve",
            "--port", str(port), "--master", "local[2]", *conf]


def spark_command(port: int, workdir: Path) -> list[str]:
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    conf = [arg for setting in SPARK_CONF if not setting.startswith("spark.driver.memory")
            for arg in ("--conf", setting)]
    return [str(spark_home / "bin" / "spark-submit"), "--master", "local[2]",
            "--driver-memory", "2g", *conf,
            "--conf", f"spark.sql.warehouse.dir={workdir / 'warehouse'}",
            "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
            "--hiveconf", f"hive.server2.thrift.port={port}",
            "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "--hiveconf", "hive.server2.authentication=NOSASL",
            "spark-internal"]


def round_trip(cursor) -> float:
    started_at = time.perf_counter()
    cursor.execute(TRIVIAL)
    assert cursor.fetchall() == [(1,)]
    return time.perf_counter() - started_at


def fetch(cursor, batch: int) -> tuple[float, float]:
    """(seconds to the first batch, seconds to the last row) of WIDE fetched in batches."""
    cursor.arraysize = batch
    started_at = time.perf_counter()
    cursor.execute(WIDE)
    rows = cursor.fetchmany(batch)
    first = time.perf_counter() - started_at
    count, last = len(rows), rows[-1]
    while rows := cursor.fetchmany(batch):
        count += len(rows)
        last = rows[-1]
    total = time.perf_counter() - started_at
    assert count == ROWS and last == (ROWS - 1, 2 * (ROWS - 1), str(ROWS - 1)), (count, last)
    return first, total


def jdbc(port: int, trivial: int, batch: int) -> tuple[list[float], float, float]:
    """The same measurements through Hive's JDBC driver (the one Spark ships, beeline's), in a
    JVM of its own (benchmarks/JdbcFetch.java, timed inside the JVM): `trivial` round trips,
    then (seconds to the first row, seconds to the last) of WIDE with fetch size `batch`."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars" / "*"
    url = f"jdbc:hive2://127.0.0.1:{port}/default;auth=noSasl"
    done = subprocess.run(["java", "-cp", str(jars), str(ROOT / "benchmarks" / "JdbcFetch.java"),
                           url, WIDE, str(trivial), str(batch), str(ROWS)],
                          capture_output=True, text=True, check=True)
    times: dict[str, list[float]] = {"trivial": [], "first": [], "total": []}
    for line in done.stdout.splitlines():
        key, _, seconds = line.partition(" ")
        times[key].append(float(seconds))
    return times["trivial"], times["first"][0], times["total"][0]


def client_floor(batch: int) -> float:
    """Seconds PyHive's own work takes for all of WIDE's batches, with no server: each response
    (column-based, no nulls, as both servers send it) decoded from memory by the generated
    Thrift code, then PyHive's unwrapping of its columns (`_fetch_more`'s work). No server can
    deliver the rows to this client faster."""
    from pyhive import hive
    from TCLIService import ttypes
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport import TTransport

    types = ["BIGINT_TYPE", "BIGINT_TYPE", "STRING_TYPE"]
    seconds = 0.0
    for start in range(0, ROWS, batch):
        ids = list(range(start, min(start + batch, ROWS)))
        columns = [ttypes.TColumn(i64Val=ttypes.TI64Column(values=ids, nulls=b"")),
                   ttypes.TColumn(i64Val=ttypes.TI64Column(values=[2 * i for i in ids], nulls=b"")),
                   ttypes.TColumn(stringVal=ttypes.TStringColumn(values=[str(i) for i in ids],
                                                                 nulls=b""))]
        out = TTransport.TMemoryBuffer()
        ttypes.TFetchResultsResp(status=ttypes.TStatus(statusCode=0), hasMoreRows=True,
                                 results=ttypes.TRowSet(startRowOffset=start, rows=[],
                                                        columns=columns)
                                 ).write(TBinaryProtocol(out))
        data = out.getvalue()
        started_at = time.perf_counter()
        response = ttypes.TFetchResultsResp()
        response.read(TBinaryProtocol(TTransport.TMemoryBuffer(data)))
        unwrapped = [hive._unwrap_column(col, kind)
                     for col, kind in zip(response.results.columns, types)]
        rows = list(zip(*unwrapped))
        seconds += time.perf_counter() - started_at
        assert rows[-1] == (ids[-1], 2 * ids[-1], str(ids[-1]))
    return seconds


def summary(values: list[float], digits: int = 3) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed fetches per server")
    parser.add_argument("--trivial", type=int, default=10, help="SELECT 1 round trips per run")
    parser.add_argument("--batch", type=int, default=10_000, help="client fetch size")
    parser.add_argument("--jdbc-runs", type=int, default=3,
                        help="timed fetches per server through Hive's JDBC driver (0: none)")
    parser.add_argument("--out", default="benchmarks/SERVER.md")
    args = parser.parse_args(argv)

    import pyhive
    import pyspark
    from pyhive import hive

    load_before = measure.load()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="recsql-bench-server-") as tmp:
        ports = {"recsql serve": free_port(), "Spark's Thrift server": free_port()}
        dirs = {name: Path(tmp) / str(i) for i, name in enumerate(ports)}
        for path in dirs.values():
            path.mkdir()
        spark_env = dict(env, SPARK_HOME=str(Path(pyspark.__file__).parent))
        recsql_port, spark_port = ports.values()
        with started(recsql_command(recsql_port), dirs["recsql serve"], recsql_port, env), \
                started(spark_command(spark_port, dirs["Spark's Thrift server"]),
                        dirs["Spark's Thrift server"], spark_port, spark_env):
            connections = {name: hive.Connection(host="127.0.0.1", port=port, auth="NOSASL")
                           for name, port in ports.items()}
            cursors = {name: connection.cursor() for name, connection in connections.items()}
            for cursor in cursors.values():  # warm-up
                for _ in range(3):
                    round_trip(cursor)
                fetch(cursor, args.batch)
            results = {name: {"trivial": [], "first": [], "total": []} for name in cursors}
            order = list(cursors)
            for run in range(args.runs):
                for name in order if run % 2 == 0 else reversed(order):
                    cursor = cursors[name]
                    results[name]["trivial"] += [round_trip(cursor) for _ in range(args.trivial)]
                    first, total = fetch(cursor, args.batch)
                    results[name]["first"].append(first)
                    results[name]["total"].append(total)
            for connection in connections.values():
                connection.close()
            for name in ports:
                results[name].update(jdbc_trivial=[], jdbc_first=[], jdbc_total=[])
            for run in range(args.jdbc_runs):
                for name in order if run % 2 == 0 else reversed(order):
                    trivial, first, total = jdbc(ports[name], args.trivial, args.batch)
                    results[name]["jdbc_trivial"] += trivial
                    results[name]["jdbc_first"].append(first)
                    results[name]["jdbc_total"].append(total)
    floor = [client_floor(args.batch) for _ in range(3)]
    write(args, results, floor, load_before, pyhive)


def write(args, results, floor, load_before, pyhive) -> None:
    ours, theirs = results["recsql serve"], results["Spark's Thrift server"]
    med = statistics.median

    def rate(result: dict, key: str = "total") -> list[float]:
        return [ROWS / seconds for seconds in result[key]]

    def row(label: str, key: str, digits: int = 3) -> str:
        ratio = med(ours[key]) / med(theirs[key])
        return f"| {label} | {summary(ours[key], digits)} | {summary(theirs[key], digits)} | {ratio:.2f}x |"

    rows_ratio = med(rate(ours)) / med(rate(theirs))
    stamp = "\n".join(measure.stamp(load_before))
    jdbc_table = ""
    if args.jdbc_runs:
        jdbc_ratio = med(rate(ours, "jdbc_total")) / med(rate(theirs, "jdbc_total"))
        jdbc_table = f"""
Through Hive's JDBC driver {HIVE_JDBC} (`benchmarks/JdbcFetch.java`, a JVM per run, timed
inside it; fetch size {args.batch:,}; {args.jdbc_runs} runs alternating as above). This driver
asks for the operation's status (`GetOperationStatus`) before every row it reads, so a fetch of
{ROWS:,} rows is also {ROWS:,} round trips:

| | recsql serve | Spark's Thrift server | recsql / Spark |
|---|--:|--:|--:|
{row(f"`{TRIVIAL}` round trip, s", "jdbc_trivial", 4)}
{row("first row (execute + first fetch), s", "jdbc_first")}
{row(f"all {ROWS:,} rows, s", "jdbc_total")}
| rows/s | {med(rate(ours, "jdbc_total")):,.0f} | {med(rate(theirs, "jdbc_total")):,.0f} | {jdbc_ratio:.2f}x |
"""
    text = f"""# `recsql serve` beside Spark's Thrift server: round trip, first batch, fetch throughput

{stamp}
- PyHive {getattr(pyhive, '__version__', '0.7')}; both servers `local[2]`, 2 GB driver, binary
  transport without SASL, on 127.0.0.1; the same PyHive client in one process
- after a warm-up, {args.runs} runs alternating between the servers (which one goes first
  alternates); each run: {args.trivial} `{TRIVIAL}` round trips, then one fetch of
  `{WIDE}` (bigint, bigint, string) with `fetchmany({args.batch})` until empty. Median (min-max).

| | recsql serve | Spark's Thrift server | recsql / Spark |
|---|--:|--:|--:|
{row(f"`{TRIVIAL}` round trip (execute + fetchall), s", "trivial", 4)}
{row(f"first batch of {args.batch:,} rows (execute + fetchmany), s", "first")}
{row(f"all {ROWS:,} rows, s", "total")}
| rows/s | {med(rate(ours)):,.0f} | {med(rate(theirs)):,.0f} | {rows_ratio:.2f}x |

- the client's own share, without a server: PyHive decoding the {ROWS // args.batch} responses
  from memory (the generated Thrift code, pure Python) and unwrapping their columns takes
  {summary(floor)} s (3 times, after the servers stopped), so no server can deliver these rows
  to this client faster than {ROWS / med(floor):,.0f} rows/s.
{jdbc_table}"""
    with open(args.out, "w") as stream:
        stream.write(text)
    print(text)
