"""The partial aggregates' fast hash map as recsql sizes it against Spark's own, side by side.

    python -m benchmarks aggmap [--graph rmat-18] [--queries sssp cc] [--runs 3]

recsql sizes `spark.sql.codegen.aggregate.fastHashMap.capacityBit` for each iteration's relation
(`executor/loop/action.py`, `aggregate_map_bits`) unless the session sets it; the other arm sets
Spark's default (16) in the session. Per query, a statement of each arm runs untimed (the base copy is
kept, the code compiled), then `--runs` rounds alternate the two, each a later statement of the
Spark loop (endgame off); per statement, the wall time and the task CPU time of the join side
and the merge side (`stages.iterations`). Answers are checked against the oracle.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from . import measure
from .engines import to_rows
from .queries import load_case
from .stages import OFF, one_run

KEY = "spark.sql.codegen.aggregate.fastHashMap.capacityBit"
ARMS = {"recsql's map (sized)": None, "Spark's map (2^16)": "16"}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks aggmap")
    p.add_argument("--graph", default="rmat-18")
    p.add_argument("--queries", nargs="*", default=["sssp", "cc"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "out" / "aggmap.md"))
    a = p.parse_args(argv)
    spark, _, _ = measure.start_spark(2, ui=True)
    lines = [*measure.stamp(), f"- load average at the start {measure.load()}", "",
             "| query | arm | wall s | join CPU s | merge CPU s | task CPU s | runs (wall) |",
             "|---|---|--:|--:|--:|--:|---|"]
    print("\n".join(lines), flush=True)
    for name in a.queries:
        q, g, oracle, edges = load_case(name, a.graph, spark)
        runs: dict[str, list[tuple[float, float, float]]] = {arm: [] for arm in ARMS}
        for k in range(a.runs + 1):
            for arm, value in ARMS.items():
                if value is None:
                    spark.conf.unset(KEY)
                else:
                    spark.conf.set(KEY, value)
                total, rows, answer = one_run(spark, q, g, edges, OFF)
                assert to_rows(answer) == oracle, "wrong answer"
                if k:
                    runs[arm].append((total, sum(r["join_cpu"] for r in rows), sum(r["merge_cpu"] for r in rows)))
        spark.conf.unset(KEY)
        for arm, figures in runs.items():
            wall, join, merge = (statistics.median(f[i] for f in figures) for i in range(3))
            cpu = statistics.median(f[1] + f[2] for f in figures)
            lines.append(f"| {name} | {arm} | {wall:.2f} | {join:.2f} | {merge:.2f} | {cpu:.2f} | "
                         f"{', '.join(f'{f[0]:.2f}' for f in figures)} |")
            print(lines[-1], flush=True)
        edges.unpersist()
    lines += ["", f"- load average at the end {measure.load()}"]
    Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
