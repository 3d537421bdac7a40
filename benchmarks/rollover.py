"""Iteration roll-over on the bowtie (Kumar & Gilray's temporal-imbalance graph).

    python -m benchmarks rollover [--graph bowtie-2000x50] [--out FILE]

Each configuration (query x `spark.recsql.rollover.maxRows`) runs in its own Python process with
its own JVM (local[2], 4 shuffle partitions, driver memory 2g, endgame off so every iteration runs
on Spark), so the peak resident memory (VmHWM from /proc/<pid>/status) of the Python driver and of
its JVM belongs to that configuration alone. The JVM's heap in use (`jstat -gc`: eden, survivors
and old generation, garbage included) is also sampled every 0.5 s and its maximum reported.

Queries: single-source reachability and path counting from vertex 1, and the transitive closure
(all-pairs reachability, the paper's bowtie case: the last iteration pairs every left vertex with
every right one, width^2 rows at once).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.measure import _children_named, _status_kib, heap_used_mib, load, stamp

QUERIES = {
    "reach": ("WITH recursive reach (X) AS (SELECT 1) UNION (SELECT edge.Dst FROM reach, edge "
              "WHERE reach.X = edge.Src) SELECT X FROM reach"),
    "cpaths": ("WITH recursive cpaths (Dst, count() AS Cnt) AS (SELECT 1, 1) UNION (SELECT "
               "edge.Dst, cpaths.Cnt FROM cpaths, edge WHERE cpaths.Dst = edge.Src) "
               "SELECT Dst, Cnt FROM cpaths"),
    "tc": ("WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION (SELECT tc.A, edge.Dst "
           "FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc"),
}
# (query, budget): 0 is roll-over off; the budgets cut the largest iteration into several slices
PLAN = [("tc", 0), ("tc", 500_000), ("reach", 0), ("reach", 500)]


# -- one configuration, in a child process -------------------------------------------------------


class HeapSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.running = pid, 0.0, True

    def run(self):
        while self.running:
            used = heap_used_mib(self.pid)
            if used is not None:
                self.peak = max(self.peak, used)
            time.sleep(0.5)


def expected(graph, query: str) -> tuple[set | None, int]:
    """(answer, rows) from networkx; the closure is only counted (4 million pairs)."""
    import networkx as nx

    from benchmarks.queries import oracle_cpaths, oracle_reach

    if query == "reach":
        answer = oracle_reach(graph)
        return answer, len(answer)
    if query == "cpaths":
        answer = oracle_cpaths(graph)
        return answer, len(answer)
    g = nx.DiGraph(zip(graph.src.tolist(), graph.dst.tolist()))
    return None, sum(len(nx.descendants(g, v)) for v in g.nodes)  # a DAG: no (v, v) pairs


def one(graph_name: str, query: str, budget: int) -> dict:
    from pyspark.sql import SparkSession

    import recsql
    from benchmarks.graphs import load as load_graph

    graph = load_graph(graph_name)
    spark = (SparkSession.builder.master("local[2]").appName("recsql-rollover")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(graph.parquet())).createOrReplaceTempView("edge")
    spark.range(1).count()
    jvm = _children_named(__import__("os").getpid(), "java")[0]
    sampler = HeapSampler(jvm)
    sampler.start()
    conf = {"spark.recsql.rollover.maxRows": budget, "spark.recsql.endgame.enabled": False}
    started = time.perf_counter()
    result = recsql.run(QUERIES[query], spark=spark, conf=conf)
    if query == "tc":
        answer, got_rows = None, result.df.count()
    else:
        answer = {tuple(int(v) for v in r) for r in result.df.collect()}
        got_rows = len(answer)
    seconds = time.perf_counter() - started
    sampler.running = False
    peak_jvm = _status_kib(jvm, "VmHWM")
    peak_py = _status_kib(__import__("os").getpid(), "VmHWM")
    oracle, oracle_rows = expected(graph, query)
    stats = result.stats
    biggest = max(stats, key=lambda s: s.output_rows or 0)  # the first iteration when not counted
    spark.stop()
    return {
        "query": query, "budget": budget, "seconds": seconds,
        "iterations": max(s.iteration for s in stats),
        "rolled_iterations": sum(1 for s in stats if s.slices > 1),
        "slices": sum(s.slices for s in stats if s.slices > 1),
        "max_slices": max(s.slices for s in stats),
        # None with roll-over off (budget 0): its join outputs are not counted
        "largest_output": max((s.output_rows for s in stats if s.output_rows is not None), default=None),
        "largest_output_no_rollover_iteration": biggest.iteration,
        "slowest_iteration_seconds": max(s.seconds for s in stats),
        "rows": got_rows, "correct": got_rows == oracle_rows and (oracle is None or answer == oracle),
        "jvm_hwm_mib": peak_jvm / 1024 if peak_jvm else None,
        "py_hwm_mib": peak_py / 1024 if peak_py else None,
        "jvm_heap_peak_mib": sampler.peak,
    }


# -- the driver: one child per configuration, then the report ------------------------------------


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks rollover",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="bowtie-2000x50")
    parser.add_argument("--out", default="benchmarks/out/rollover.md")
    parser.add_argument("--plan", nargs="*", metavar="QUERY:BUDGET",
                        help="configurations to run (default: " +
                        " ".join(f"{q}:{b}" for q, b in PLAN) + ")")
    parser.add_argument("--one", nargs=2, metavar=("QUERY", "BUDGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(one(args.graph, args.one[0], int(args.one[1]))), flush=True)
        return
    started_load = load()
    runs = []
    plan = [(p.split(":")[0], int(p.split(":")[1])) for p in args.plan] if args.plan else PLAN
    for query, budget in plan:
        out = subprocess.run([sys.executable, "-m", "benchmarks.rollover", "--graph", args.graph,
                              "--one", query, str(budget)], capture_output=True, text=True, check=False)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            runs.append({"query": query, "budget": budget, "error": out.stderr[-2000:]})
        else:
            runs.append(json.loads(line[len("RESULT "):]))
        print(runs[-1], file=sys.stderr, flush=True)
    Path(args.out).write_text(report(args, started_load, runs))


def report(args, started_load: str, runs: list[dict]) -> str:
    lines = [
        f"# Iteration roll-over on {args.graph}",
        "",
        *stamp(started_load),
        "- shared machine: times are noisy, memory much less so",
        "- each row is its own process and JVM: local[2], 4 shuffle partitions, driver memory 2g, "
        "`spark.recsql.endgame.enabled=false`; budget = `spark.recsql.rollover.maxRows` (0: off)",
        "- largest output: rows of the largest single join output (candidates of one action); "
        "peak memory: VmHWM of the process; JVM heap: the largest heap in use sampled every 0.5 s",
        "",
        "| query | budget | correct | iterations | rolled iterations | slices (max) | largest output "
        "rows | total s | slowest iteration s | JVM peak RSS MiB | JVM heap peak MiB | Python peak "
        "RSS MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['query']} | {r['budget']} | failed: "
                         f"{r['error'].strip().splitlines()[-1] if r['error'].strip() else '?'} |")
            continue
        lines.append(
            f"| {r['query']} | {r['budget']:,} | {'yes' if r['correct'] else 'NO'} | "
            f"{r['iterations']} | {r['rolled_iterations']} | {r['slices']} ({r['max_slices']}) | "
            f"{'not counted' if r['largest_output'] is None else format(r['largest_output'], ',')} | "
            f"{r['seconds']:.1f} | {r['slowest_iteration_seconds']:.1f} | "
            f"{_mib(r['jvm_hwm_mib'])} | {_mib(r['jvm_heap_peak_mib'])} | {_mib(r['py_hwm_mib'])} |")
    return "\n".join(lines) + "\n"


def _mib(value) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.0f}"


if __name__ == "__main__":  # the child process of one configuration (`--one`)
    main()
