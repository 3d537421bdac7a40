"""The recursive state's partition count on the Spark loop (endgame off), side by side in one session.

    python -m benchmarks.partitions [--queries sssp cc] [--graphs rmat-16] [--widths auto 2 4 8 200]
        [--runs 3] [--out benchmarks/PARTITIONS.md]

The session keeps Spark's default `spark.sql.shuffle.partitions` (200), as a PySpark user's own
session does. recsql turns AQE off during its iterations, so nothing coalesces that width; by
default it caps the state's partitions at one per core on a local master (`auto`). The other rows force
`spark.recsql.partitions`: 200 is what recsql did before the cap. Every answer is checked against
the oracle; medians of interleaved runs after one warm-up round.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import recsql

from . import measure
from .engines import to_rows
from .queries import QUERIES, load_case

WIDTHS = ("auto", "2", "4", "8", "200")


def one_run(spark, sql: str, edges, width: str) -> tuple[float, list, int]:
    conf = {"spark.recsql.endgame.enabled": "false"}
    if width != "auto":
        conf["spark.recsql.partitions"] = width
    start = time.perf_counter()
    res = recsql.run(sql, spark=spark, edge=edges, conf=conf)
    answer = res.df.toArrow()
    seconds = time.perf_counter() - start
    return seconds, to_rows(answer), res.df.rdd.getNumPartitions()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.partitions")
    p.add_argument("--queries", nargs="+", default=["sssp", "cc"], choices=sorted(QUERIES))
    p.add_argument("--graphs", nargs="+", default=["rmat-16"])
    p.add_argument("--widths", nargs="+", default=list(WIDTHS), help="auto, or partition counts")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "PARTITIONS.md"))
    a = p.parse_args(argv)
    if "auto" not in a.widths:
        p.error("--widths must include auto (the other rows are reported against it)")
    spark, _, _ = measure.start_spark(200)
    lines = [
        "# The state's partition count (recsql, endgame off)",
        "",
        f"- command: `python -m benchmarks.partitions {' '.join(sys.argv[1:])}`",
        f"- machine: {os.cpu_count()} cores, {platform.platform()}; Spark local[2] (2 task slots), "
        "`spark.sql.shuffle.partitions=200` (Spark's default)",
        f"- median of {a.runs} interleaved runs after a warm-up round; every answer checked "
        "against the oracle",
    ]
    for graph in a.graphs:
        for query in a.queries:
            lines += ["", *case(spark, query, graph, a.widths, a.runs)]
    lines += ["", f"Load average at the end: {measure.load()}."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def case(spark, query: str, graph: str, widths: list[str], runs: int) -> list[str]:
    """The table of one query on one graph."""
    q, g, oracle, edges = load_case(query, graph, spark)
    times: dict[str, list[float]] = {w: [] for w in widths}
    used: dict[str, int] = {}
    for k in range(runs + 1):  # round 0 warms the JVM up and is not reported
        for width in widths:
            seconds, answer, used[width] = one_run(spark, q.sql(g), edges, width)
            assert answer == oracle, f"wrong answer with {width} partitions"
            if k:
                times[width].append(seconds)
    edges.unpersist()
    auto = statistics.median(times["auto"])
    lines = [
        f"## {q.name} on {g.name} ({g.m:,} edges)",
        "",
        "| `spark.recsql.partitions` | partitions used | median s (min-max) | x auto |",
        "|---|--:|--:|--:|",
    ]
    for width in widths:
        xs = times[width]
        med = statistics.median(xs)
        lines.append(f"| {width} | {used[width]} | {med:.2f} ({min(xs):.2f}-{max(xs):.2f}) | "
                     f"{med / auto:.2f}x |")
    return lines


if __name__ == "__main__":
    main()
