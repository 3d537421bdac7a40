"""Recursive doubling for transitive closure against the linear rules, side by side.

    python -m benchmarks.doubling [--runs 3] [--out benchmarks/DOUBLING.md]

Transitive closure (set of pairs) with the endgame off, so every iteration runs on Spark, with
`spark.recsql.doubling.afterIterations` = 0 (linear only) and the default 8, runs interleaved,
answers checked against a plain-Python closure. Graphs: chains (the deep case doubling is for),
a binary tree pointing up, and a small RMAT graph (shallow: doubling should not switch at all).
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

from . import graphs, measure

QUERY = ("WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION "
         "(SELECT tc.A, edge.Dst FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc")
SETTINGS = {"linear": 0, "doubling after 8": 8}


def chain(n: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(n)]


def closure(edges) -> set[tuple[int, int]]:
    succ: dict[int, set[int]] = {}
    for s, d in edges:
        succ.setdefault(s, set()).add(d)
    result = set()
    for start in succ:
        seen, stack = set(), list(succ[start])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(succ.get(node, ()))
        result |= {(start, node) for node in seen}
    return result


def cases() -> dict[str, list[tuple[int, int]]]:
    tree = graphs.load("bintree-up-12")
    rmat = graphs.load("rmat-8")
    return {
        "chain-200": chain(200),
        "bintree-up-12": list(zip(tree.src.tolist(), tree.dst.tolist())),
        "rmat-8": list(zip(rmat.src.tolist(), rmat.dst.tolist())),
    }


def one_run(spark, after: int) -> tuple[float, int, set]:
    t = time.perf_counter()
    res = recsql.run(QUERY, spark=spark, conf={"spark.recsql.endgame.enabled": "false",
                                               "spark.recsql.doubling.afterIterations": after})
    table = res.df.toArrow()
    seconds = time.perf_counter() - t
    return seconds, len(res.stats) - 1, set(zip(*[c.to_pylist() for c in table.columns]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.doubling")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "DOUBLING.md"))
    a = p.parse_args(argv)
    spark, _, _ = measure.start_spark(4)
    rows = []
    for name, edges in cases().items():
        spark.createDataFrame(edges, "Src INT, Dst INT").createOrReplaceTempView("edge")
        expected = closure(edges)
        times = {label: [] for label in SETTINGS}
        rounds = {}
        for k in range(a.runs + 1):  # round 0 is the warm-up and answer check
            for label, after in SETTINGS.items():
                seconds, iterations, answer = one_run(spark, after)
                assert answer == expected, f"{name} {label}: wrong answer"
                rounds[label] = iterations
                if k:
                    times[label].append(seconds)
        med = {label: statistics.median(ts) for label, ts in times.items()}
        rows.append((name, len(edges), len(expected), rounds, med))
        print(name, rounds, med, flush=True)
    write(a, rows)


def write(a, rows) -> None:
    lines = [
        "# Recursive doubling vs linear transitive closure (endgame off)",
        "",
        f"- command: `python -m benchmarks.doubling {' '.join(sys.argv[1:])}`",
        f"- machine: {os.cpu_count()} cores, {platform.platform()}; load average at the end "
        f"{measure.load()}; Spark local[2], 4 shuffle partitions",
        f"- median of {a.runs} runs after a warm-up run, settings interleaved; every answer equal "
        "to a plain-Python closure",
        "",
        "| graph | edges | closure pairs | linear: iterations | linear: s | doubling after 8: "
        "iterations | doubling after 8: s | linear / doubling |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, m, pairs, rounds, med in rows:
        lin, dbl = med["linear"], med["doubling after 8"]
        lines.append(f"| {name} | {m:,} | {pairs:,} | {rounds['linear']} | {lin:.2f} | "
                     f"{rounds['doubling after 8']} | {dbl:.2f} | {lin / dbl:.2f}x |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
