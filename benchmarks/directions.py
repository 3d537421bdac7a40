"""The join side of one Spark-loop iteration, three ways, by Spark's task CPU time (issue 38).

    python -m benchmarks directions [--graph rmat-18] [--shares 0.001 0.1 0.8] [--out FILE]

For a delta of a given share of the graph's vertices (each vertex kept with that probability,
values `v % 97`, placed by vertex as the loop's state is), one iteration's join side written
three ways, each ending in the partial aggregate, the shuffle and a `localCheckpoint`:

* `scan`: the delta joined with the base copy (hash-partitioned by Src, sorted, cached), as the
  loop does: the whole copy is scanned whatever the delta's size;
* `index`: `index.py`'s form: the copy grouped by Src (a list of (Dst, Cost) per key, cached)
  semi-joined with the delta, unnested, then joined with the delta as the branch is written;
* `arrow`: the base copy handed to a Python worker (`mapInArrow`) that only counts its rows: the
  floor of any join run in Arrow or DuckDB on the executors that reads the base from Spark's
  cache (no state may stay on an executor between jobs, so each iteration hands it over again).

CPU time is Spark's task CPU time from its UI REST API (the Python worker's own CPU is not in
it), the figure to read on a shared machine; wall time is shown beside it. Medians of 3 runs
after one warm-up, the ways interleaved.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from . import graphs, measure

WAYS = ("scan", "index", "arrow")


def _count_rows(batches):
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


class Bench:
    def __init__(self, spark, graph: str, partitions: int = 2) -> None:
        from pyspark.sql import functions as F

        self.spark, self.F, self.P = spark, F, partitions
        edges = spark.read.parquet(str(graphs.load(graph).parquet()))
        self.base = edges.repartition(partitions, "Src").sortWithinPartitions("Src").persist()
        self.adj = (edges.repartition(partitions, "Src").groupBy("Src")
                    .agg(F.collect_list(F.struct("Dst", "Cost")).alias("rows")).persist())
        self.vertices = edges.select(F.col("Src").alias("v")).distinct().persist()
        self.base.count(), self.adj.count()
        self.n = self.vertices.count()

    def delta(self, share: float):
        F = self.F
        d = self.vertices.where(F.rand(7) < share).select("v", (F.col("v") % 97).alias("d"))
        d = d.repartition(self.P, "v").localCheckpoint(eager=True)
        return d, d.count()

    def way(self, name: str, d):
        F = self.F
        if name == "scan":
            joined = d.hint("shuffle_hash").join(self.base, d.v == self.base.Src)
        elif name == "index":
            hit = self.adj.join(d.hint("shuffle_hash"), self.adj.Src == d.v, "left_semi")
            rows = hit.select("Src", F.inline("rows"))
            joined = d.hint("shuffle_hash").join(rows, d.v == rows.Src)
        else:
            return self.base.mapInArrow(_count_rows, "n long")
        return joined.groupBy(F.col("Dst").alias("v")).agg(F.min(F.col("d") + F.col("Cost")).alias("d"))

    def run(self, name: str, d) -> tuple[float, float]:
        """(wall seconds, task CPU seconds) of one run."""
        started, t = time.time(), time.perf_counter()
        self.way(name, d).localCheckpoint(eager=True)
        wall = time.perf_counter() - t
        time.sleep(1.2)  # the UI hears of a stage's end asynchronously
        sc = self.spark.sparkContext
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
        with urllib.request.urlopen(url) as response:
            stages = json.load(response)

        def epoch(stamp):
            return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=timezone.utc).timestamp()

        cpu = sum(s["executorCpuTime"] for s in stages
                  if s.get("submissionTime") and epoch(s["submissionTime"]) >= started - 0.05)
        return wall, cpu / 1e9


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks directions")
    p.add_argument("--graph", default="rmat-18")
    p.add_argument("--shares", type=float, nargs="+", default=[0.001, 0.1, 0.8])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "out" / "directions.md"))
    a = p.parse_args(argv)
    load_start = measure.load()
    spark, _, _ = measure.start_spark(2, driver_memory="3g", ui=True)
    bench = Bench(spark, a.graph)
    lines = [f"# The join side of one iteration, three ways: {a.graph}", "", *measure.stamp(load_start),
             f"- {bench.n:,} source vertices; local[2], 2 partitions; medians of {a.runs} runs after "
             "one warm-up, interleaved", "",
             "| delta (share of vertices) | " + " | ".join(f"{w} cpu / wall s" for w in WAYS) + " |",
             "|---|" + "--:|" * len(WAYS)]
    for share in a.shares:
        d, rows = bench.delta(share)
        runs: dict[str, list[tuple[float, float]]] = {w: [] for w in WAYS}
        for r in range(a.runs + 1):
            for w in WAYS:
                out = bench.run(w, d)
                if r:
                    runs[w].append(out)
        cells = [f"{statistics.median(c for _, c in runs[w]):.3f} / {statistics.median(x for x, _ in runs[w]):.2f}"
                 for w in WAYS]
        lines.append(f"| {rows:,} ({share:g}) | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
