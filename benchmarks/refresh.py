"""A materialized view's refresh against a full recompute (issue 40).

    python -m benchmarks refresh [--scales 16] [--queries sssp cc reach]
                                 [--changes append:0.0001 append:0.001 append:0.01 append:0.1 delete:0.001]
                                 [--runs 3] [--out FILE]

Per (query, RMAT scale): the graph's edges as a parquet table (both directions for CC), and a
materialized view of the query over it (SSSP with its predecessor, `argmin`). Then per change
and round, in this order:
- the change is made: appended edges drawn from the RMAT generator with another seed (both
  directions for CC), or deleted edges drawn uniformly (the table rewritten without them);
- `REFRESH MATERIALIZED VIEW` with `spark.recsql.refresh.incremental` on, cold (every kept base
  copy dropped and Spark's cache cleared first: a session's first statement) in odd rounds and
  warm in even ones, its path read from `EXPLAIN REFRESH` before it;
- `REFRESH MATERIALIZED VIEW ... FULL` (what the view's definition costs from scratch at this
  commit, over the same tables), cold or warm alike.
Every answer plain Spark reads back is checked against scipy's over the edges as they are then.
The rows a refresh derived are its iterations' new or changed rows, summed; the rows whose value
changed are the answer's rows that were not in the previous answer.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from . import graphs, measure

SSSP = ("WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT {s}, 0, {s}) "
        "UNION (SELECT e.Dst, path.Cost + e.Cost, path.Dst FROM path, edges e WHERE path.Dst = e.Src) "
        "SELECT Dst, Cost, Pred FROM path")
CC = ("WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM edges) UNION "
      "(SELECT e.Dst, cc.C FROM cc, edges e WHERE cc.X = e.Src) SELECT X, C FROM cc")
REACH = ("WITH recursive reach (X) AS (SELECT {s}) UNION "
         "(SELECT e.Dst FROM reach, edges e WHERE reach.X = e.Src) SELECT X FROM reach")
QUERIES = {"sssp": SSSP, "cc": CC, "reach": REACH}
ON = {"spark.recsql.refresh.incremental": "true"}


# ---------------------------------------------------------------- oracles (scipy)
def _csr(src, dst, w, n):
    import scipy.sparse as sp

    # duplicate (src, dst) pairs: the cheapest counts for a shortest path
    order = np.lexsort((w, dst, src))
    src, dst, w = src[order], dst[order], w[order]
    first = np.ones(len(src), bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    return sp.csr_matrix((w[first].astype(np.float64), (src[first], dst[first])), shape=(n, n))


def oracle(query: str, src, dst, w, source: int) -> set:
    from scipy.sparse.csgraph import breadth_first_order, connected_components, dijkstra

    n = int(max(src.max(initial=0), dst.max(initial=0), source)) + 1
    graph = _csr(src, dst, w, n)
    if query == "reach":
        return {(int(v),) for v in breadth_first_order(graph, source, return_predecessors=False)}
    if query == "cc":
        verts = np.unique(src)  # the base step's rows: every edge's source (symmetric table)
        _, label = connected_components(graph, directed=True, connection="weak")
        low = np.full(label.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(low, label[verts], verts)
        return set(zip(verts.tolist(), low[label[verts]].tolist()))
    dist = dijkstra(graph, indices=source)
    # the least predecessor on a shortest path (what min() keeps of the ranked (Cost, Pred))
    reached = np.isfinite(dist)
    tight = reached[src] & (dist[src] + w == dist[dst])
    pred = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(pred, dst[tight], src[tight])
    pred[source] = source
    verts = np.nonzero(reached)[0]
    return set(zip(verts.tolist(), dist[verts].astype(np.int64).tolist(), pred[verts].tolist()))


# ---------------------------------------------------------------- one case
class Case:
    """One view over one edge table, the edges as they are now, and the changes made to them."""

    def __init__(self, spark, query: str, scale: int, schema: str) -> None:
        g = graphs.rmat(scale)
        self.extra = graphs.rmat(scale, seed=7)
        if query == "cc":
            g, self.extra = g.made_symmetric(), self.extra.made_symmetric()
        self.spark, self.query, self.graph = spark, query, g
        self.src, self.dst, self.w = g.src, g.dst, g.w
        self.table, self.view = f"{schema}.edges_{query}", f"{schema}.mv_{query}"
        self.rng = np.random.default_rng([scale, len(query)])
        self.write(self.src, self.dst, self.w, "create")
        import recsql

        recsql.sql(f"CREATE MATERIALIZED VIEW {self.view} AS "
                   + QUERIES[query].format(s=g.source).replace("edges", self.table), spark=spark)
        self.answer = self.check()

    def write(self, src, dst, w, mode: str) -> None:
        import pyarrow as pa

        df = self.spark.createDataFrame(pa.table({"Src": src, "Dst": dst, "Cost": w}))
        if mode == "create":
            df.write.saveAsTable(self.table, format="parquet")
        else:
            df.write.insertInto(self.table, overwrite=mode == "overwrite")

    def change(self, kind: str, share: float) -> int:
        count = max(1, round(share * len(self.src)))
        if kind == "append":
            x = self.extra
            pick = self.rng.choice(len(x.src), count, replace=False)
            s, d, w = x.src[pick], x.dst[pick], x.w[pick]
            if self.query == "cc":  # the table stays symmetric
                s, d, w = np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([w, w])
            self.src, self.dst, self.w = (np.concatenate([a, b]) for a, b in
                                          ((self.src, s), (self.dst, d), (self.w, w)))
            self.write(s, d, w, "append")
            return len(s)
        keep = np.ones(len(self.src), bool)
        keep[self.rng.choice(len(self.src), count, replace=False)] = False
        if self.query == "cc":  # drop both directions of each picked edge
            gone = set(zip(self.src[~keep].tolist(), self.dst[~keep].tolist()))
            keep &= ~np.fromiter(((d, s) in gone for s, d in zip(self.src.tolist(), self.dst.tolist())),
                                 bool, len(self.src))
        removed = int((~keep).sum())
        self.src, self.dst, self.w = self.src[keep], self.dst[keep], self.w[keep]
        self.write(self.src, self.dst, self.w, "overwrite")
        return removed

    def check(self) -> set:
        got = {tuple(int(v) for v in r) for r in self.spark.table(self.view).collect()}
        expected = oracle(self.query, self.src, self.dst, self.w, self.graph.source)
        if got != expected:
            raise AssertionError(f"{self.view}: {len(got ^ expected)} rows differ from scipy's answer")
        return got

    def refresh(self, full: bool, cold: bool) -> dict:
        import recsql
        from recsql.executor.state import bases

        path = recsql.explain(f"REFRESH MATERIALIZED VIEW {self.view}{' FULL' if full else ''}",
                              spark=self.spark, conf=ON).splitlines()[0].rsplit(": ", 1)[-1]
        if cold:
            bases.forget(self.spark)
            self.spark.catalog.clearCache()
        started = time.perf_counter()
        res = recsql.refresh(self.view, full=full, spark=self.spark, conf=ON)
        seconds = time.perf_counter() - started
        before, self.answer = self.answer, self.check()
        return {"seconds": seconds, "path": path, "derived": sum(s.delta_rows for s in res.stats),
                "changed": len(self.answer - before), "iterations": len({s.iteration for s in res.stats})}


def run_case(spark, query: str, scale: int, changes: list[tuple[str, float]], runs: int,
             schema: str) -> dict:
    case = Case(spark, query, scale, schema)
    out = {"query": query, "scale": scale, "edges": len(case.src), "rows": len(case.answer), "changes": []}
    for kind, share in changes:
        rounds: dict[str, list[dict]] = defaultdict(list)
        load_start = measure.load()
        for r in range(runs):
            cold = r % 2 == 0
            rows = case.change(kind, share)
            temperature = "cold" if cold else "warm"
            rounds[f"incremental {temperature}"].append({**case.refresh(False, cold), "rows": rows})
            rounds[f"full {temperature}"].append(case.refresh(True, cold))
        out["changes"].append({"kind": kind, "share": share, "rounds": rounds,
                               "load": (load_start, measure.load())})
        print(f"{query} 2^{scale} {kind} {share:g} done", flush=True)
    return out


# ---------------------------------------------------------------- the results file
def _cell(runs: list[dict], key: str = "seconds") -> str:
    xs = [r[key] for r in runs]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f}, {len(xs)})"


def _one(load: str) -> str:
    """The 1-minute load average of `measure.load()`'s three."""
    return load.split(" / ")[0]


def render(cases: list[dict], started_load: str, runs: int) -> str:
    lines = ["# A materialized view's refresh against a full recompute (issue 40)", "",
             *measure.stamp(started_load),
             f"- method: `benchmarks/refresh.py` (its docstring); {runs} rounds per change, cold in "
             "odd rounds and warm in even ones; median (min-max, n) seconds of "
             "`recsql.refresh(...)`, each answer checked against scipy's", "",
             "| query | graph | change | rows changed in the table | path taken | incremental cold | "
             "full cold | incremental warm | full warm | full / incremental (warm) | rows derived | "
             "answer rows changed | load (1 min) at start / end |",
             "|---|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for c in cases:
        for ch in c["changes"]:
            r = ch["rounds"]
            inc = r["incremental cold"] + r["incremental warm"]
            ratio = "-"
            if r["incremental warm"] and r["full warm"]:
                full, incremental = (statistics.median(x["seconds"] for x in r[k])
                                     for k in ("full warm", "incremental warm"))
                ratio = f"{full / incremental:.2f}x"
            lines.append(
                f"| {c['query'].upper()} | RMAT 2^{c['scale']} ({c['edges']:,} edges, {c['rows']:,} answer rows) "
                f"| {ch['kind']} {ch['share']:.2%} | {statistics.median(x['rows'] for x in inc):,.0f} "
                f"| {', '.join(sorted({x['path'] for x in inc}))} "
                f"| {_cell(r['incremental cold'])} | {_cell(r['full cold'])} | {_cell(r['incremental warm'])} "
                f"| {_cell(r['full warm'])} | {ratio} | {statistics.median(x['derived'] for x in inc):,.0f} "
                f"| {statistics.median(x['changed'] for x in inc):,.0f} "
                f"| {_one(ch['load'][0])} / {_one(ch['load'][1])} |")
    return "\n".join(lines) + "\n"


def _change(text: str) -> tuple[str, float]:
    kind, _, share = text.partition(":")
    if kind not in ("append", "delete"):
        raise argparse.ArgumentTypeError(f"{text}: a change is append:SHARE or delete:SHARE")
    return kind, float(share)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks refresh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", type=int, nargs="+", default=[16])
    p.add_argument("--queries", nargs="+", default=list(QUERIES), choices=list(QUERIES))
    p.add_argument("--changes", type=_change, nargs="+",
                   default=[("append", 0.0001), ("append", 0.001), ("append", 0.01), ("append", 0.1),
                            ("delete", 0.001)])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default="benchmarks/RESULTS-refresh.md")
    args = p.parse_args(argv)
    started_load = measure.load()
    spark, _, _ = measure.start_spark(2)
    place = Path(tempfile.mkdtemp(prefix="recsql-refresh-"))
    schema = "recsql_refresh_bench"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema} LOCATION '{place}'")
    cases = []
    try:
        for scale in args.scales:
            for query in args.queries:
                cases.append(run_case(spark, query, scale, args.changes, args.runs, schema))
                Path(args.out).write_text(render(cases, started_load, args.runs))  # as it goes
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
        shutil.rmtree(place, ignore_errors=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
