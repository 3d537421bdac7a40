"""A/B of recsql settings on one query and graph, runs interleaved, answers checked.

    python -m benchmarks.ab --query sssp --graph rmat-14 \
        --a spark.recsql.skew.enabled=true --b spark.recsql.skew.enabled=false \
        [--common spark.recsql.endgame.enabled=false] [--runs 5] [--out benchmarks/AB.md]

Appends one section to --out: the command, machine load, and per setting the median (min-max)
seconds and the median of the Spark iterations' driver and job seconds.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import recsql

from . import measure
from .engines import to_rows
from .queries import QUERIES, load_case


def conf_pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def one_run(spark, sql: str, edges, conf: dict) -> dict:
    t = time.perf_counter()
    res = recsql.run(sql, spark=spark, conf=conf, edge=edges)
    answer = res.df.toArrow()
    seconds = time.perf_counter() - t
    on_spark = [s for s in res.stats if s.iteration > 0 and s.ran_on == "spark"]
    return {"answer": answer, "seconds": seconds, "iterations": len(res.stats),
            "driver": sum(s.driver_seconds for s in on_spark),
            "jobs": sum(s.job_seconds for s in on_spark)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab")
    p.add_argument("--query", default="sssp", choices=sorted(QUERIES))
    p.add_argument("--graph", default="rmat-14")
    p.add_argument("--a", nargs="+", default=[], help="KEY=VALUE settings of A")
    p.add_argument("--b", nargs="+", default=[], help="KEY=VALUE settings of B")
    p.add_argument("--common", nargs="*", default=[], help="KEY=VALUE settings of both")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", default=str(Path(__file__).parent / "AB.md"))
    a = p.parse_args(argv)
    spark, _, _ = measure.start_spark(4)
    q, g, oracle, edges = load_case(a.query, a.graph, spark)
    common = conf_pairs(a.common)
    variants = {"A": {**common, **conf_pairs(a.a)}, "B": {**common, **conf_pairs(a.b)}}
    runs = {name: [] for name in variants}
    load_before = measure.load()
    for k in range(a.runs + 1):  # round 0: warm-up and answer check, not reported
        for name, conf in (variants.items() if k % 2 else reversed(variants.items())):
            run = one_run(spark, q.sql(g), edges, conf)
            assert to_rows(run.pop("answer")) == oracle, f"{name}: wrong answer"
            if k:
                runs[name].append(run)
    write(a, q, g, variants, runs, load_before)


def write(a, q, g, variants, runs, load_before) -> None:
    def med(name, key):
        return statistics.median(r[key] for r in runs[name])

    lines = [
        f"## {q.name} on {g.name}: A/B of settings",
        "",
        f"- command: `python -m benchmarks.ab {' '.join(sys.argv[1:])}`",
        f"- load average before / after: {load_before} / {measure.load()} (2 cores); "
        f"{a.runs} runs each after a warm-up, order alternating A B, B A; answers equal the oracle",
        "",
        "| | settings | median s (min-max) | iterations | Spark iterations: driver s | jobs s |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for name, conf in variants.items():
        secs = [r["seconds"] for r in runs[name]]
        lines.append(f"| {name} | `{conf}` | {statistics.median(secs):.2f} ({min(secs):.2f}-"
                     f"{max(secs):.2f}) | {med(name, 'iterations'):.0f} | {med(name, 'driver'):.2f} "
                     f"| {med(name, 'jobs'):.2f} |")
    ratio = med("B", "seconds") / med("A", "seconds")
    lines += ["", f"B / A = {ratio:.2f}", "", ""]
    with open(a.out, "a") as out:
        out.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
