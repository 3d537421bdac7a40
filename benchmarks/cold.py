"""A session's first recsql statement against its later ones (issue 29, "Cold statements").

    python -m benchmarks coldstart [--query sssp] [--graph rmat-16] [--sessions 2] [--statements 4]
                                   [--out FILE]

The careful loop runs beside recsql the same way: its own first statement shows what a fresh
JVM charges any first job (class loading, JIT, code generation), whoever sends it.

Each session is a fresh Python process with a fresh Spark session (local[2], 2 shuffle
partitions, driver memory 2g): the edge table is read from parquet, cached and counted (not
timed), then the same statement runs `--statements` times, each timed up to its answer being in
the driver (`toArrow`) and checked against the oracle. Statement 1 is what a `recsql -f` run or a
notebook's first query pays: recsql's own imports, the JVM's class loading and JIT warm-up, Spark's
code generation, and the base copies recsql keeps for later statements (the partitioned copy on
Spark, or the table pulled to the driver). The engines run interleaved (one session of each, then
the next round), so load drift on a shared machine falls on all of them alike.

The `cold16` suite's cold engines time a statement whose kept base copies were dropped, in a warm
process; this one times the first statement of a process.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENGINES = {"default settings": {}, "endgame off": {"spark.recsql.endgame.enabled": "false"},
           # the baseline's own first statement: what any first job of a fresh JVM pays
           "careful loop": None}


def child(query: str, graph: str, engine: str, statements: int) -> None:
    from benchmarks import measure
    from benchmarks.engines import to_rows
    from benchmarks.queries import load_case

    spark, _, _ = measure.start_spark(2, driver_memory="2g")
    q, g, oracle, edges = load_case(query, graph, spark)
    seconds = []
    for _ in range(statements):
        start = time.perf_counter()
        if ENGINES[engine] is None:
            from benchmarks.engines import Workload
            from benchmarks.engines.careful import CarefulLoop

            answer = CarefulLoop().run(Workload(q, g, spark, edges), float("inf")).answer
        else:
            import recsql  # inside the timing: a first statement pays recsql's imports

            answer = recsql.run(q.sql(g), spark=spark, conf=ENGINES[engine]).df.toArrow()
        seconds.append(time.perf_counter() - start)
        assert to_rows(answer) == oracle, "wrong answer"
    spark.stop()
    print("RESULT " + json.dumps({"seconds": seconds, "load": measure.load()}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks coldstart")
    p.add_argument("--query", default="sssp")
    p.add_argument("--graph", default="rmat-16")
    p.add_argument("--sessions", type=int, default=2)
    p.add_argument("--statements", type=int, default=4)
    p.add_argument("--out", default="benchmarks/RESULTS-coldstart.md")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.query, a.graph, a.child, a.statements)
        return
    from benchmarks import measure

    started = measure.load()
    runs: dict[str, list[list[float]]] = {e: [] for e in ENGINES}
    lines = []
    for k in range(a.sessions):
        for engine in ENGINES:
            out = subprocess.run([sys.executable, "-m", "benchmarks.cold", "--query", a.query, "--graph",
                                  a.graph, "--statements", str(a.statements), "--child", engine],
                                 capture_output=True, text=True, check=True).stdout
            found = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
            runs[engine].append(found["seconds"])
            lines.append(f"- session {k + 1}, {engine}: " + ", ".join(f"{s:.2f}" for s in found["seconds"])
                         + f" s (load {found['load']})")
            print(lines[-1], flush=True)
    table = [f"| {a.query} on {a.graph} | first statement | later statements (median) | first / later "
             "| first - later |", "|---|--:|--:|--:|--:|"]
    for engine, sessions in runs.items():
        first = statistics.median(s[0] for s in sessions)
        later = statistics.median(x for s in sessions for x in s[1:])
        table.append(f"| {engine} | {first:.2f} s | {later:.2f} s | {first / later:.2f}x "
                     f"| {first - later:.2f} s |")
    Path(a.out).write_text("\n".join([
        "# A fresh process's first statement against its later ones", "", *measure.stamp(started), "",
        (__doc__ or "").split("\n\n", 2)[2].strip(), "", *table, "",
        "Each session's statements, in seconds:", "", *lines]) + "\n")
    print("\n".join(table))

if __name__ == "__main__":
    main()
