"""Where a recsql run's time goes, for one query on one graph (endgame off: every iteration on Spark).

    python -m benchmarks floor [--query sssp] [--graph rmat-16] [--runs 5] [--out FILE]

Per run: the statement's wall time split into the fixed part (parse, plan, type inference,
pre-partitioning the base table, the base step) and the iterations, each iteration split into
the time before its action (building the branches' DataFrames, SQL analysis) and its action
(building the merge, Spark's planning and its one job, reading the metrics back); then fetching
the answer. The
floor of one Spark job on this machine is measured in the same session: a trivial `count()` and
a `localCheckpoint(eager=True)` of a tiny partitioned DataFrame (what an iteration must at least do).
Spark's web UI is on for this tool: its REST API tells each tail iteration's Spark job (submitted
to completed) from the driver's work around it, and the tiny checkpoint's alike.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import recsql

from . import measure
from .engines import to_rows
from .queries import QUERIES, load_case

TINY_DELTA = 100  # rows: an iteration reading at most this many is a tail iteration


def floor_seconds(spark, partitions: int, repeats: int = 10) -> tuple[float, float, list]:
    """Median seconds of a trivial job and of a tiny localCheckpoint hash-partitioned as the state
    (`partitions` partitions), and when each checkpoint ran (epoch seconds), to find its Spark job
    in Spark's UI afterwards."""
    trivial, tiny, windows = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        spark.range(10).count()
        trivial.append(time.perf_counter() - t)
        start, t = time.time(), time.perf_counter()
        spark.range(10).repartition(partitions, "id").localCheckpoint(eager=True)
        tiny.append(time.perf_counter() - t)
        windows.append((start, time.time()))
    return statistics.median(trivial), statistics.median(tiny), windows


def finished_jobs(spark) -> list[tuple[float, float]]:
    time.sleep(1)  # Spark's UI hears of a job's end asynchronously
    return measure.spark_jobs(spark)


def one_run(spark, sql: str, edges) -> dict:
    marks = {}
    start = time.perf_counter()
    ends = {-1: time.time()}  # iteration -> epoch seconds when it ended (-1: the statement began)

    def on_iteration(stats):
        ends[stats.iteration] = time.time()
        if stats.iteration == 0:
            marks["base_done"] = time.perf_counter()

    res = recsql.run(sql, spark=spark, progress=on_iteration, edge=edges,
                     conf={"spark.recsql.endgame.enabled": "false"})
    fixpoint_done = time.perf_counter()
    answer = res.df.toArrow()
    done = time.perf_counter()
    iterations = [s for s in res.stats if s.iteration > 0]
    delta_in = {s.iteration + 1: s.delta_rows for s in res.stats}  # the delta each iteration reads
    return {
        "answer": answer,
        "total": done - start,
        "before_iterations": marks.get("base_done", fixpoint_done) - start,
        "base_step": next((s.seconds for s in res.stats if s.iteration == 0), 0.0),
        "iterations": len(iterations),
        "iteration_seconds": sum(s.seconds for s in iterations),
        "driver": sum(s.driver_seconds for s in iterations),
        "jobs": sum(s.job_seconds for s in iterations),
        "per_iteration": [(s.driver_seconds, s.job_seconds) for s in iterations],
        # iterations that read a tiny delta (at most TINY_DELTA rows): the long tail's cost
        "tiny": [s.seconds for s in iterations if delta_in.get(s.iteration, 0) <= TINY_DELTA],
        # when each tail iteration ran, to find its Spark job in Spark's UI afterwards
        "tiny_windows": [(ends[s.iteration - 1], ends[s.iteration]) for s in iterations
                         if delta_in.get(s.iteration, 0) <= TINY_DELTA],
        "fetch": done - fixpoint_done,
        "strategies": sorted({s.join_strategy for s in iterations}),
        "partitions": res.df.rdd.getNumPartitions(),  # the checkpointed state's, as the loop left it
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks floor")
    p.add_argument("--query", default="sssp", choices=sorted(QUERIES))
    p.add_argument("--graph", default="rmat-16")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "out" / "floor.md"))
    a = p.parse_args(argv)
    spark, session_s, first_job_s = measure.start_spark(4, ui=True)
    q, g, oracle, edges = load_case(a.query, a.graph, spark)
    runs = []
    for k in range(a.runs + 1):  # the first run warms the JVM up and is not reported
        run = one_run(spark, q.sql(g), edges)
        assert to_rows(run.pop("answer")) == oracle, "wrong answer"
        if k:
            runs.append(run)
    partitions = runs[0]["partitions"]
    trivial, tiny, floor_windows = floor_seconds(spark, partitions)
    jobs = finished_jobs(spark)
    for run in runs:
        run["tiny_jobs"] = [measure.job_seconds(jobs, *w) for w in run.pop("tiny_windows")]
    tiny_job = statistics.median(measure.job_seconds(jobs, *w) for w in floor_windows)
    write(a, q, g, runs, (trivial, tiny, tiny_job, partitions), session_s, first_job_s)


def write(a, q, g, runs, floor, session_s, first_job_s) -> None:
    trivial, tiny, tiny_job, partitions = floor

    def med(key):
        return statistics.median(r[key] for r in runs)

    n = statistics.median(r["iterations"] for r in runs)
    fixed = med("before_iterations") - med("base_step")
    per_driver = statistics.median(d for r in runs for d, _ in r["per_iteration"])
    per_job = statistics.median(j for r in runs for _, j in r["per_iteration"])
    lines = [
        f"# Time breakdown: {q.name} on {g.name} (recsql, endgame off)",
        "",
        *measure.stamp(),
        f"- Spark local[2], 4 shuffle partitions, the state in {partitions}; "
        f"session start {session_s:.1f} s, first job {first_job_s:.1f} s (not included)",
        f"- graph: {g.m:,} edges; median of {len(runs)} runs after one warm-up run; answers checked "
        "against the oracle",
        "",
        "| part | median seconds | share |",
        "|---|--:|--:|",
    ]
    total = med("total")
    parts = [
        ("parse, plan, type inference, pre-partition + cache the base table", fixed),
        ("base step (iteration 0: one job)", med("base_step")),
        (f"iterations: before the action (the branches' DataFrames, SQL analysis), {n:.0f} iterations",
         med("driver")),
        (f"iterations: the action (the merge's DataFrames, Spark's planning, its one job, the "
         f"metrics), {n:.0f} iterations", med("jobs")),
        ("fetch the answer (toArrow)", med("fetch")),
    ]
    for name, seconds in parts:
        lines.append(f"| {name} | {seconds:.2f} | {seconds / total:.0%} |")
    lines += [
        f"| **total** | **{total:.2f}** | |",
        "",
        f"Per iteration (median over all iterations of all runs): before the action {per_driver:.3f} s, "
        f"the action {per_job:.3f} s. Floor on this machine, same session: a trivial job "
        f"{trivial:.3f} s, a tiny `localCheckpoint(eager=True)` hash-partitioned as the state "
        f"({partitions} partitions) {tiny:.3f} s.",
        f"Join strategies chosen: {', '.join(runs[0]['strategies'])}.",
    ]
    tiny_runs = [t for r in runs for t in r["tiny"]]
    if tiny_runs:
        tail = statistics.median(tiny_runs)
        tail_job = statistics.median(j for r in runs for j in r["tiny_jobs"])
        rest = statistics.median(t - j for r in runs for t, j in zip(r["tiny"], r["tiny_jobs"]))
        lines += [
            f"Tail iterations (reading a delta of at most {TINY_DELTA} rows; {len(tiny_runs)} over all "
            f"runs): median {tail:.3f} s whole (driver and job), {tail / tiny:.2f}x the tiny "
            "partitioned `localCheckpoint`.",
            "",
            "The tail iteration and the tiny `localCheckpoint` split by Spark's UI into the Spark job "
            "(submitted to completed) and the rest (building and analysing the DataFrames, Spark's "
            "planning and code generation, reading the observed metrics back), medians:",
            "",
            "| | whole | Spark job | the rest |",
            "|---|--:|--:|--:|",
            f"| tail iteration | {tail:.3f} s | {tail_job:.3f} s | {rest:.3f} s |",
            f"| tiny partitioned `localCheckpoint` | {tiny:.3f} s | {tiny_job:.3f} s | {tiny - tiny_job:.3f} s |",
        ]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
