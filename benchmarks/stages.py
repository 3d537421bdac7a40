"""Where each iteration of the Spark loop spends its time, by Spark stage (endgame off).

    python -m benchmarks stages [--query sssp] [--graph rmat-18] [--runs 2] [--out FILE]

An iteration is one Spark job of two stages: the **join side** (scan the delta and the
co-partitioned base copy, the hash join, the partial aggregate of the candidates, their shuffle
write) and the **merge side** (the shuffle read, the final aggregate, the merge with the state,
its `localCheckpoint` write). Spark's UI REST API (public, localhost) gives each stage's task
time and CPU time, and the SQL metrics give the rows each part moved: base rows scanned, join
output rows, candidates shuffled, state rows written. A statement is run once untimed (so the
base copy is kept, as a later statement finds it), then `--runs` times; the tables are the
median run's. CPU time is the figure to read on a loaded machine: task time counts the waits
for a core that other processes hold.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import recsql

from . import measure
from .engines import to_rows
from .queries import QUERIES, load_case

OFF = {"spark.recsql.endgame.enabled": "false"}


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=timezone.utc).timestamp()


def _rest(spark, path: str):
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}{path}"
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def _count(value: str) -> int:
    """A SQL metric's count ("955,298"), or its total ("total (min, med, max ...)\n12 (...)")."""
    text = value.split("\n")[-1].split(" (")[0] if "\n" in value else value
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return 0


def _sql_rows(executions: list[dict]) -> dict[str, int]:
    """Rows moved by the iteration's executions: base rows scanned (cached scans), join output,
    candidates shuffled (records written by exchanges)."""
    out = {"scanned": 0, "joined": 0, "shuffled": 0}
    for execution in executions:
        for node in execution["nodes"]:
            metrics = {m["name"]: m["value"] for m in node["metrics"]}
            name = node["nodeName"]
            if name == "InMemoryTableScan":
                out["scanned"] += _count(metrics.get("number of output rows", "0"))
            elif name.endswith("Join"):
                out["joined"] += _count(metrics.get("number of output rows", "0"))
            elif name == "Exchange":
                out["shuffled"] += _count(metrics.get("shuffle records written", "0"))
    return out


def iterations(spark, cte: str, stats, started: float) -> list[dict]:
    """Per iteration of a statement that began at epoch `started`: its stages' times and rows."""
    time.sleep(1.5)  # the UI hears of a job's end asynchronously
    jobs = [j for j in _rest(spark, "/jobs") if _epoch(j["submissionTime"]) >= started]
    stages = {s["stageId"]: s for s in _rest(spark, "/stages") if s["status"] == "COMPLETE"}
    executions = [e for e in _rest(spark, "/sql?details=true&planDescription=false&length=100000")
                  if _epoch(e["submissionTime"]) >= started]
    rows = []
    for s in stats:
        label = f"recsql: {cte} iteration {s.iteration}"
        mine = [stages[i] for j in jobs if j.get("description") == label for i in j["stageIds"]
                if i in stages]
        join = [st for st in mine if st["shuffleWriteRecords"] and not st["shuffleReadRecords"]]
        merge = [st for st in mine if st not in join]
        rows.append({
            "iteration": s.iteration, "delta": s.delta_rows, "seconds": s.seconds,
            "driver": s.driver_seconds, "action": s.job_seconds,
            "join_run": sum(st["executorRunTime"] for st in join) / 1e3,
            "join_cpu": sum(st["executorCpuTime"] for st in join) / 1e9,
            "merge_run": sum(st["executorRunTime"] for st in merge) / 1e3,
            "merge_cpu": sum(st["executorCpuTime"] for st in merge) / 1e9,
            "gc": sum(st["jvmGcTime"] for st in mine) / 1e3,
            "stages": len(mine),
            **_sql_rows([e for e in executions if e.get("description") == label]),
        })
    return rows


def one_run(spark, q, g, edges, conf) -> tuple[float, list[dict], object]:
    started = time.time()
    t = time.perf_counter()
    res = recsql.run(q.sql(g), spark=spark, edge=edges, conf=conf)
    answer = res.df.toArrow()
    total = time.perf_counter() - t
    cte = res.stats[0].cte
    return total, iterations(spark, cte, list(res.stats), started), answer


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks stages")
    p.add_argument("--query", default="sssp", choices=sorted(QUERIES))
    p.add_argument("--graph", default="rmat-18")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--conf", nargs="*", default=[], help="extra recsql settings, KEY=VALUE")
    p.add_argument("--out", default=str(Path(__file__).parent / "out" / "stages.md"))
    a = p.parse_args(argv)
    conf = {**OFF, **dict(kv.split("=", 1) for kv in a.conf)}
    spark, session_s, first_job_s = measure.start_spark(2, ui=True)
    q, g, oracle, edges = load_case(a.query, a.graph, spark)
    load_start = measure.load()
    runs = []
    for k in range(a.runs + 1):  # the first keeps the base copy and warms the JVM up
        total, rows, answer = one_run(spark, q, g, edges, conf)
        assert to_rows(answer) == oracle, "wrong answer"
        if k:
            runs.append((total, rows))
    write(a, q, g, conf, runs, load_start)


def write(a, q, g, conf, runs, load_start) -> None:
    med = statistics.median(t for t, _ in runs)
    total, rows = min(runs, key=lambda r: abs(r[0] - med))
    lines = [
        f"# Where an iteration goes: {q.name} on {g.name} (recsql, Spark loop)",
        "",
        *measure.stamp(),
        f"- load average at the start {load_start}, at the end {measure.load()}",
        f"- settings: {conf}; local[2], 2 shuffle partitions; {g.m:,} edges; a later statement "
        f"(the base copy kept by an untimed first); the median of {len(runs)} runs "
        f"({', '.join(f'{t:.2f}' for t, _ in runs)} s), answers checked against the oracle",
        "",
        "Join side: scan the delta and the base copy, hash join, partial aggregate, shuffle write. "
        "Merge side: shuffle read, final aggregate, merge with the state, checkpoint write. "
        "run = task time (two tasks, summed), cpu = their CPU time.",
        "",
        "| iteration | delta read | wall s | driver s | action s | join run / cpu s | "
        "merge run / cpu s | GC s | base rows scanned | join output rows | rows shuffled |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    delta_in = 0
    for r in rows:
        lines.append(
            f"| {r['iteration']} | {delta_in:,} | {r['seconds']:.2f} | {r['driver']:.2f} | "
            f"{r['action']:.2f} | {r['join_run']:.2f} / {r['join_cpu']:.2f} | "
            f"{r['merge_run']:.2f} / {r['merge_cpu']:.2f} | {r['gc']:.2f} | {r['scanned']:,} | "
            f"{r['joined']:,} | {r['shuffled']:,} |")
        delta_in = r["delta"]

    def total_of(key):
        return sum(r[key] for r in rows)

    lines += [
        f"| **all** | | **{total_of('seconds'):.2f}** | {total_of('driver'):.2f} | "
        f"{total_of('action'):.2f} | {total_of('join_run'):.2f} / {total_of('join_cpu'):.2f} | "
        f"{total_of('merge_run'):.2f} / {total_of('merge_cpu'):.2f} | {total_of('gc'):.2f} | "
        f"{total_of('scanned'):,} | {total_of('joined'):,} | {total_of('shuffled'):,} |",
        "",
        f"Statement {total:.2f} s in all (the iterations above, the set-up and fetching the answer).",
    ]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
