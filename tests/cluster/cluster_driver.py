"""The driver process of tests/test_cluster.py: one SparkSession on a standalone master.

A Python process holds one SparkContext and the suite's is `local[2]`, so the cluster session
lives here, in a process of its own:

    python tests/cluster_driver.py spark://127.0.0.1:PORT job.json

`job.json` holds `tables` (name -> {"schema": DDL, "rows": [...]}, registered as temp views)
and `queries` (each {"name", "sql", "conf", "kill_at"}). Each query starts once two executors
are registered; its outcome is printed as one JSON line: its rows, the iteration of every stats
entry, recsql's warnings, the pids of the executors killed (one after each iteration listed in
`kill_at`), or the error it raised. Progress lines go to stderr.

Not a test module (pytest collects `test_*.py` only); test-only code may use `sparkContext`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class Warnings(logging.Handler):
    """recsql's log records (the recovery warning among them), kept for the report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def executor_pids(app_id: str) -> dict[str, int]:
    """Executor id -> pid of this application's executor JVMs on this machine, from /proc."""
    pids = {}
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # not a process, or gone
            continue
        if EXECUTOR_CLASS in argv and app_id in argv and "--executor-id" in argv:
            pids[argv[argv.index("--executor-id") + 1]] = int(proc.name)
    return pids


def victim(app_id: str) -> int | None:
    """The pid of the oldest executor (lowest id): the one that holds the state's blocks. At
    the start both executors hold some; after a kill the reloaded state lands on the survivor
    while the replacement starts, and the state's tasks then stay with their blocks (locality).
    The test asserts the recovery, so a kill that lost nothing would show."""
    pids = executor_pids(app_id)
    return pids[min(pids, key=int)] if pids else None


def killer(app_id: str, at: list[int], killed: list[int]):
    """A progress callback that SIGKILLs one executor JVM once each iteration in `at` is done
    (the first time that iteration number is reported)."""
    pending = set(at)

    def progress(stats) -> None:
        print(f"{time.strftime('%X')} iteration {stats.iteration}: {stats.delta_rows} new",
              file=sys.stderr, flush=True)
        if stats.iteration not in pending:
            return
        pending.discard(stats.iteration)
        pid = victim(app_id)
        print(f"killing executor pid {pid} of {executor_pids(app_id)}", file=sys.stderr,
              flush=True)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    return progress


def run_query(spark, query: dict, handler: Warnings) -> dict:
    import recsql

    handler.messages.clear()
    killed: list[int] = []
    progress = killer(spark.sparkContext.applicationId, query.get("kill_at", []), killed)
    outcome: dict = {"name": query["name"], "killed": killed}
    started = time.monotonic()
    try:
        result = recsql.run(query["sql"], spark=spark, conf=query.get("conf") or {},
                            progress=progress)
        outcome["rows"] = sorted(list(r) for r in result.df.collect())
        outcome["iterations"] = [s.iteration for s in result.stats]
    except Exception as error:  # noqa: BLE001 - reported, so the next queries still run
        outcome["error"] = {"type": type(error).__name__, "message": str(error)[:3000],
                            "condition": getattr(error, "condition", None)}
    outcome["seconds"] = round(time.monotonic() - started, 1)
    outcome["warnings"] = list(handler.messages)
    return outcome


def session(master: str):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master).appName("recsql-cluster-tests")
        .config("spark.executor.cores", "1").config("spark.executor.memory", "1g")
        .config("spark.cores.max", "2").config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.recsql.endgame.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def wait_for_executors(spark, count: int, timeout: float = 120) -> None:
    """Both executors registered, so the first query's tasks spread over the two workers (the
    block managers the driver knows, less its own)."""
    deadline = time.monotonic() + timeout
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} executors after {timeout} s")
        time.sleep(0.5)


def main(master: str, job_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    handler = Warnings()
    logging.getLogger("recsql").addHandler(handler)
    spark = session(master)
    for name, table in job.get("tables", {}).items():
        rows = [tuple(r) for r in table["rows"]]
        spark.createDataFrame(rows, table["schema"]).createOrReplaceTempView(name)
    for query in job["queries"]:
        wait_for_executors(spark, job.get("executors", 2))  # a killed one is replaced
        print(json.dumps(run_query(spark, query, handler)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
