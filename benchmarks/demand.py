"""Demand-driven evaluation: one node's reachable set through a transitive-closure view.

    python -m benchmarks.demand [--rmat 12] [--tree-depth 16] [--rounds 2] [--out benchmarks/DEMAND.md]

The view `closure(node, reached)` is a stored recursive view (temporary, of this session) over
`tc(X, Y) <- edge; tc(X, Y) <- tc(X, Z), edge(Z, Y)`; the question is
`SELECT reached FROM closure WHERE node = s`. Side by side, interleaved round by round in one run:
recsql with the rewrite (default), recsql with spark.recsql.demand.enabled=false, Spark 4.3's own
`WITH RECURSIVE` on the same filtered CTE (UNION ALL, so only on the cycle-free tree), and DuckDB
on the same filtered CTE (UNION). Every answer is checked against a plain-Python BFS; recsql's
rows are the recursion's final state size (its stats).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import duckdb

import recsql
from benchmarks.graphs import Graph, bintree, rmat
from recsql.executor.session import session

VIEW = ("CREATE OR REPLACE TEMPORARY VIEW closure AS WITH recursive tc (X, Y) AS "
        "(SELECT Src, Dst FROM edge) UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) "
        "SELECT X AS node, Y AS reached FROM tc")
QUERY = "SELECT reached FROM closure WHERE node = {s}"
SPARK_NATIVE = ("WITH RECURSIVE tc(X, Y) AS (SELECT Src, Dst FROM edge UNION ALL "
                "SELECT tc.X, e.Dst FROM tc JOIN edge e ON tc.Y = e.Src) "
                "SELECT DISTINCT Y AS reached FROM tc WHERE X = {s}")
DUCKDB = ("WITH RECURSIVE tc(X, Y) AS (SELECT Src, Dst FROM edge UNION "
          "SELECT tc.X, e.Dst FROM tc JOIN edge e ON tc.Y = e.Src) "
          "SELECT Y AS reached FROM tc WHERE X = {s}")


def oracle(graph: Graph, source: int) -> set[int]:
    """Nodes reachable from `source` by a path of at least one edge (BFS)."""
    succ = defaultdict(list)
    for s, d in zip(graph.src.tolist(), graph.dst.tolist()):
        succ[s].append(d)
    seen, todo = set(), list(succ[source])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(succ[node])
    return seen


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


def run(args) -> list[str]:
    spark = session("local[2]", "demand-bench", **{"spark.ui.enabled": "false",
                                                    "spark.sql.cteRecursionLevelLimit": "-1",
                                                    "spark.sql.cteRecursionRowLimit": "-1"})
    graphs = ([(bintree(args.tree_depth), 2)] if args.tree_depth else []) + \
        ([(rmat(args.rmat), None)] if args.rmat else [])
    lines = ["# Demand-driven evaluation: one node's reachable set through a closure view", "",
             f"Command: `python -m benchmarks.demand {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {os.cpu_count()} cores, Spark local[2], Python "
             f"{platform.python_version()}, DuckDB {duckdb.__version__}; shared with other "
             f"engineers' Spark jobs: 1-minute load average {load()} at the start.  ",
             "Query: `SELECT reached FROM closure WHERE node = s`, `closure` a recursive view "
             "(transitive closure of `edge`). Seconds per run, engines interleaved per round; "
             "min and median over the rounds. Rows: the recursion's state at its fixpoint.", ""]
    for graph, source in graphs:
        source = graph.source if source is None else source
        expected = oracle(graph, source)
        edges = spark.read.parquet(str(graph.parquet())).selectExpr("Src", "Dst")
        edges.createOrReplaceTempView("edge")
        edges.cache().count()
        created = recsql.run(VIEW, spark=spark)  # analysed, not run: no iteration
        assert not created.stats, "CREATE VIEW ran the recursion"
        con = duckdb.connect()
        con.execute(f"SET threads = {os.cpu_count() or 1}")
        con.execute(f"CREATE TABLE edge AS SELECT Src, Dst FROM read_parquet('{graph.parquet()}')")
        engines = {
            "recsql, demand on (default)": lambda s=source: _recsql(spark, s, {}),
            "recsql, demand off": lambda s=source: _recsql(spark, s, {"spark.recsql.demand.enabled": "false"}),
            "Spark WITH RECURSIVE": (lambda s=source: ({r[0] for r in spark.sql(SPARK_NATIVE.format(s=s))
                                                        .collect()}, None)) if graph.acyclic else None,
            "DuckDB": lambda s=source, c=con: ({r[0] for r in c.sql(DUCKDB.format(s=s)).fetchall()}, None),
        }
        times: dict[str, list[float]] = defaultdict(list)
        produced: dict[str, int | None] = {}
        loads = []
        for round_ in range(args.rounds):
            for name, engine in engines.items():
                if engine is None or ("off" in name and (args.skip_off or round_ > 0 and not args.off_every_round)):
                    continue
                loads.append(load())
                start = time.perf_counter()
                answer, rows = engine()
                times[name].append(time.perf_counter() - start)
                assert answer == expected, f"{name} on {graph.name}: wrong answer"
                produced[name] = rows
                print(f"{graph.name} {name} round {round_}: {times[name][-1]:.2f}s rows={rows}",
                      flush=True)
        lines += [f"## {graph.name}: {graph.description}; {graph.m} edges, source {source}, "
                  f"{len(expected)} nodes reached", "",
                  f"Load averages during the runs: {', '.join(loads)}", "",
                  "| engine | min s | median s | runs | recursion rows | answer |",
                  "|---|---:|---:|---:|---:|---|"]
        for name, engine in engines.items():
            if not times[name] and engine is not None:
                lines.append(f"| {name} | - | - | 0 | - | not run (--skip-off) |")
                continue
            if engine is None:
                lines.append(f"| {name} | - | - | 0 | - | cannot: UNION ALL only, and the graph has "
                             "cycles (never terminates) |")
                continue
            t = times[name]
            rows = produced[name]
            lines.append(f"| {name} | {min(t):.2f} | {statistics.median(t):.2f} | {len(t)} | "
                         f"{rows if rows is not None else 'n/a'} | matches BFS |")
        on, off = times["recsql, demand on (default)"], times["recsql, demand off"]
        if off:
            lines += ["", f"Speed-up of the rewrite (median off / median on): "
                      f"{statistics.median(off) / statistics.median(on):.1f}x", ""]
        con.close()
        edges.unpersist()
        if args.out:  # what is measured so far survives a later graph that does not finish
            args.out.write_text("\n".join(lines) + "\n")
    spark.stop()
    return lines


def _recsql(spark, source: int, conf: dict) -> tuple[set[int], int]:
    result = recsql.run(QUERY.format(s=source), spark=spark, conf=conf)
    answer = {r[0] for r in result.df.collect()}
    return answer, max(s.total_rows for s in result.stats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rmat", type=int, default=12, help="RMAT scale (0: none)")
    parser.add_argument("--tree-depth", type=int, default=16,
                        help="complete binary tree depth, 2^(d+1)-1 nodes (0: none)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--off-every-round", action="store_true",
                        help="run recsql without the rewrite every round (default: the first only)")
    parser.add_argument("--skip-off", action="store_true",
                        help="do not run recsql without the rewrite (too slow on large graphs)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    lines = run(args)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
