"""Long-chain reachability: time per iteration must not grow with the iteration number.

    python -m benchmarks chain [--nodes 2000] [--endgame on|off] [--out FILE]

Writes the machine, the command, total time, per-iteration time at the start, middle and end of
the fixpoint, and the resident memory of the Python and JVM driver processes plus the JVM heap
in use (`jstat -gc`, heap in use right after sampled iterations, so it includes garbage not yet
collected) every 5% of the iterations.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import recsql

from . import measure

QUERY = (
    "WITH recursive reach (X) AS (SELECT 0) UNION "
    "(SELECT edge.Dst FROM reach, edge WHERE reach.X = edge.Src) SELECT count(*) FROM reach"
)


def rss_mb(pid: int) -> float:
    kib = measure._status_kib(pid, "VmRSS")
    return kib / 1024 if kib else float("nan")


def heap_used_mb(pid: int) -> float:
    used = measure.heap_used_mib(pid)
    return float("nan") if used is None else used


def live_heap_mb(pid: int) -> float:
    """Heap in use right after a full GC (`jcmd <pid> GC.run`): the live data, without the
    garbage the sampled `heap_used_mb` also counts. NaN without a JDK."""
    import shutil
    import subprocess

    if not shutil.which("jcmd"):
        return float("nan")
    subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True)
    return heap_used_mb(pid)


def jvm_pids() -> list[int]:
    """The Java processes started by this Python driver (its descendants)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    descendants, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - descendants
        descendants |= frontier
    return [p for p in descendants if b"java" in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks chain")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--endgame", choices=["on", "off"], default="off")
    parser.add_argument("--out", default="benchmarks/out/chain.md")
    opts = parser.parse_args(argv)
    started_load = measure.load()

    started = time.perf_counter()
    spark = recsql.session(master="local[2]", **{"spark.sql.shuffle.partitions": "4",
                                                 "spark.ui.enabled": "false"})
    jvm_start = time.perf_counter() - started
    spark.range(opts.nodes).selectExpr("CAST(id AS INT) AS Src", "CAST(id + 1 AS INT) AS Dst") \
        .createOrReplaceTempView("edge")
    memory: list[tuple[int, float, float, float, float]] = []
    jvms = jvm_pids()

    def on_iteration(stats):
        if stats.iteration % max(1, opts.nodes // 20) == 0:
            sampled = (stats.iteration, rss_mb(os.getpid()), sum(rss_mb(p) for p in jvms),
                       sum(heap_used_mb(p) for p in jvms))
            memory.append((*sampled, sum(live_heap_mb(p) for p in jvms)))

    t0 = time.perf_counter()
    result = recsql.run(QUERY, spark=spark, progress=on_iteration,
                        conf={"spark.recsql.endgame.enabled": opts.endgame == "on",
                              "spark.recsql.maxIterations": opts.nodes + 10})
    count = result.df.collect()[0][0]
    total = time.perf_counter() - t0
    assert count == opts.nodes + 1, f"wrong answer {count}, expected {opts.nodes + 1}"
    spark_iters = [s for s in result.stats if s.iteration > 0 and s.ran_on == "spark"]
    seconds = [s.seconds for s in spark_iters]

    def med(xs):
        return statistics.median(xs) if xs else float("nan")

    tenth = max(1, len(seconds) // 10)
    lines = [
        f"# Chain reachability, {opts.nodes} nodes, endgame {opts.endgame}",
        "",
        *measure.stamp(started_load),
        f"- JVM start-up: {jvm_start:.1f} s",
        f"- answer: {count} reachable nodes (expected {opts.nodes + 1}), "
        f"{len(result.stats) - 1} iterations ({len(spark_iters)} on Spark)",
        f"- total: {total:.1f} s (includes the forced GCs of the live-heap samples)",
        f"- median seconds per Spark iteration: first 10% {med(seconds[:tenth]):.3f}, "
        f"middle 10% {med(seconds[len(seconds) // 2:len(seconds) // 2 + tenth]):.3f}, "
        f"last 10% {med(seconds[-tenth:]):.3f}",
        "",
        "Heap in use is sampled right after the iteration (it includes garbage not yet collected);",
        "live heap is the heap in use after a forced full GC (`jcmd <pid> GC.run`) at the same point.",
        "The time of the forced GC is not counted in any iteration.",
        "",
        "| iteration | Python RSS MB | JVM RSS MB | JVM heap in use MB | JVM live heap MB |",
        "|---:|---:|---:|---:|---:|",
        *[f"| {i} | {py:.0f} | {jvm:.0f} | {heap:.0f} | {live:.0f} |"
          for i, py, jvm, heap, live in memory],
    ]
    Path(opts.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
