"""Spatial balance: the largest-to-average partition size of each iteration's join output, with
and without splitting heavy join keys (recsql/executor/strategies/skew.py).

    python -m benchmarks balance [--depths 16] [--sources 32] [--out FILE]

Cases: transitive closure of complete binary trees pointing up (child -> parent: late deltas hold
few join keys, each with tens of thousands of rows) and down (the balanced control), and on
soc-Epinions1 (power-law degrees) the closure from a sample of sources. Each case runs with
`spark.recsql.skew.enabled` false and true (defaults otherwise, endgame off so every iteration
runs on Spark); answers are checked against each other and against the expected count.
"""

from __future__ import annotations

import argparse
import time
from itertools import pairwise
from pathlib import Path

import recsql
from benchmarks import graphs, measure

TC = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge)
  UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src)
SELECT count(*) FROM tc"""
SAMPLE_TC = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge WHERE Src < {limit})
  UNION (SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src)
SELECT count(*) FROM tc"""
BIG = 10000  # the summary's iterations: an input delta of at least this many rows
MODES = (("off", {"spark.recsql.skew.enabled": "false"}), ("on", {"spark.recsql.skew.enabled": "true"}))


def run_case(spark, query: str, conf: dict) -> tuple[int, float, list]:
    started = time.perf_counter()
    result = recsql.run(query, spark=spark, conf={"spark.recsql.endgame.enabled": "false", **conf})
    count = result.df.collect()[0][0]
    return count, time.perf_counter() - started, result.stats


def load_edges(spark, graph: graphs.Graph) -> None:
    spark.read.parquet(str(graph.parquet())).select("Src", "Dst").cache().createOrReplaceTempView("edge")
    spark.table("edge").count()


def tree_tc_size(depth: int) -> int:
    """Pairs (descendant, ancestor): every vertex at depth d has d ancestors."""
    return sum(d * 2 ** d for d in range(depth + 1))


def summary(name: str, runs: dict) -> str:
    """Largest ratio over the iterations whose input delta has at least BIG rows."""
    cells = []
    for label in ("off", "on"):
        stats = runs[label][2]
        big = [b.balance for a, b in pairwise(stats) if a.delta_rows >= BIG and b.balance]
        cells.append(_ratio(max(big, default=None)))
    split = sum(s.split_keys for s in runs["on"][2])
    return (f"| {name} | {cells[0]} | {cells[1]} | {split} | {runs['off'][1]:.1f} | "
            f"{runs['on'][1]:.1f} |")


def table(name: str, runs: dict) -> list[str]:
    off, on = runs["off"], runs["on"]
    lines = [f"### {name}", "",
             f"- answer: {off[0]} rows without balancing, {on[0]} with",
             f"- total: {off[1]:.1f} s without balancing, {on[1]:.1f} s with", "",
             "| iteration | delta rows | largest / average, off | largest / average, on | keys split | s off | s on |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for a, b in zip(off[2][1:], on[2][1:]):
        lines.append(f"| {a.iteration} | {a.delta_rows} | {_ratio(a.balance)} | {_ratio(b.balance)} | "
                     f"{b.split_keys} | {a.seconds:.2f} | {b.seconds:.2f} |")
    return lines + [""]


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks balance")
    parser.add_argument("--depths", type=int, nargs="+", default=[16])
    parser.add_argument("--sources", type=int, default=32, help="soc-Epinions1: sources Src < N")
    parser.add_argument("--skip-epinions", action="store_true")
    parser.add_argument("--out", default="benchmarks/out/balance.md")
    opts = parser.parse_args(argv)
    started_load = measure.load()

    spark = recsql.session(master="local[2]", **{"spark.sql.shuffle.partitions": "4",
                                                 "spark.ui.enabled": "false",
                                                 "spark.ui.showConsoleProgress": "false",
                                                 "spark.driver.memory": "3g"})
    spark.sparkContext.setLogLevel("ERROR")
    cases = []
    for depth in opts.depths:
        for up in (True, False):
            cases.append((graphs.bintree(depth, up=up), TC, tree_tc_size(depth)))
    if not opts.skip_epinions:
        cases.append((graphs.real("soc-Epinions1"), SAMPLE_TC.format(limit=opts.sources), None))
    warm = graphs.bintree(8, up=True)  # JIT and caches warm before anything is timed
    load_edges(spark, warm)
    for _, conf in MODES:
        run_case(spark, TC, conf)
    body, rows = [], []
    for graph, query, expected in cases:
        load_edges(spark, graph)
        runs = {}
        for label, conf in MODES:
            runs[label] = run_case(spark, query, conf)
            print(graph.name, label, runs[label][0], f"{runs[label][1]:.1f}s", flush=True)
        assert runs["off"][0] == runs["on"][0], "balancing changed the answer"
        assert expected is None or runs["off"][0] == expected, (runs["off"][0], expected)
        title = f"{graph.name}: {graph.description}"
        if graph.name == "soc-Epinions1":
            title += f"; closure from the sources Src < {opts.sources}"
        body += table(title, runs)
        rows.append(summary(graph.name, runs))
        spark.catalog.dropTempView("edge")
    write(opts, rows, body, started_load)


def write(opts, rows: list[str], body: list[str], started_load: str) -> None:
    lines = [
        "# Spatial balance: heavy join keys split over partitions",
        "",
        *measure.stamp(started_load),
        "- Spark local[2], 4 partitions, AQE off (recsql's fixpoint)",
        ("- query: transitive closure `tc(X, Y) <- tc(X, Z), edge(Z, Y)`; the delta joins `edge` "
         "(pre-partitioned by Src) on tc.Y"),
        ("- largest / average: the iteration's join output rows in its largest task over the rows "
         "per partition (output / 4); 1.00 is even, 4.00 is one task doing everything. `-`: no output"),
        ("- off: `spark.recsql.skew.enabled=false`; on: `true`, its defaults otherwise (threshold 0.25 x rows per "
         "partition, at least 10000 rows, 16 keys at most). Times are wall-clock seconds on a "
         "shared machine (load average well above its 2 cores): compare them loosely. One run "
         "each, after an untimed warm-up"),
        "",
        f"## Summary (largest / average over the iterations whose input delta has >= {BIG} rows)",
        "",
        "| case | largest / average, off | largest / average, on | keys split | total s off | total s on |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "## Per iteration",
        "",
        *body,
    ]
    Path(opts.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
