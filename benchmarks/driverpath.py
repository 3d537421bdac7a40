"""The driver path against DuckDB in the same process (issue 38, part 2).

    python -m benchmarks driver [--scales 16 20] [--queries sssp cc] [--runs 3] [--tiny-runs 15]
                                [--out FILE]

Per (query, RMAT scale), in one process, the edge table read from parquet and cached in Spark
(as in `run.py`), interleaved rounds of:
- recsql cold: every kept base copy dropped first (`bases.forget`), so the statement is a
  session's first over the cached table: it sizes and pulls the table (and identifies it);
- recsql warm: the next statement, which finds the copy kept and proves the table unchanged;
- DuckDB cold: a new connection, the table loaded from the same parquet file, then the query of
  `shared/baselines/duckdb_queries.sql` (`engines/duckdb_engine.py`'s `SQL`);
- DuckDB warm: the query alone, over the table loaded once;
- Spark's floor: a table of the answer's rows and types handed to Spark (`createDataFrame`)
  and fetched back (`toArrow`), the least any answer handed back through Spark costs.
Each time is a statement up to its answer in the driver (recsql: `toArrow()` of its DataFrame;
DuckDB: `to_arrow_table()`), every answer checked against DuckDB's. recsql's time is split as
`recsql_engine.breakdown` splits it.

Then the tiny case, the analyst's (docs/server.md): SSSP over 4 edges in a CSV file registered as
the CLI's `--table` does, warm, against Spark's `SELECT 1` and Spark's own 5-step `UNION ALL`
recursion (`SPARK_RECURSION`, run by Spark alone) in the same rounds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from . import graphs, measure
from .engines import to_rows
from .engines.duckdb_engine import SQL as DUCKDB_SQL
from .engines.recsql_engine import breakdown
from .queries import QUERIES, graph_for

TINY = """WITH RECURSIVE path (node, cost) AS (
  SELECT 1, 0
  UNION
  SELECT e.dst, MIN(p.cost + e.cost) FROM path p JOIN edge e ON p.node = e.src GROUP BY e.dst)
SELECT node, cost FROM path"""
TINY_EDGES = "src,dst,cost\n1,2,1\n2,3,2\n1,3,5\n3,4,1\n"
TINY_ANSWER = {(1, 0), (2, 1), (3, 3), (4, 4)}
# issue 38's yardstick for the tiny case: a recursion Spark runs by itself (it takes UNION ALL only)
SPARK_RECURSION = ("WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) "
                   "SELECT n FROM r")
PARTS = ("setup", "pull", "fixpoint_driver", "write_back", "fetch")


def duckdb_connection(g: graphs.Graph):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count() or 1}")
    con.execute(f"CREATE TABLE edge AS SELECT * FROM read_parquet('{g.parquet()}')")
    return con


def duckdb_run(con, q, g):
    return con.sql(DUCKDB_SQL[q.name].format(s=g.source)).to_arrow_table()


def recsql_run(spark, q, g, cold: bool) -> tuple[float, dict[str, float], object]:
    import recsql
    from recsql.executor.state import bases

    if cold:
        bases.forget(spark)
    started = time.perf_counter()
    res = recsql.run(q.sql(g), spark=spark)
    fetching = time.perf_counter()
    answer = res.df.toArrow()
    done = time.perf_counter()
    if any(s.ran_on != "driver" for s in res.stats):
        raise AssertionError("the statement did not run wholly on the driver")
    return done - started, breakdown(res.stats, done - started, done - fetching), answer


def floor(spark, answer) -> float:
    started = time.perf_counter()
    spark.createDataFrame(answer).toArrow()
    return time.perf_counter() - started


def case(spark, query: str, scale: int, runs: int) -> dict:
    q = QUERIES[query]
    g = graphs.load(graph_for(q, f"rmat-{scale}"))
    edges = spark.read.parquet(str(g.parquet())).cache()
    edges.count()
    edges.createOrReplaceTempView("edge")
    warm_con = duckdb_connection(g)
    expected = to_rows(duckdb_run(warm_con, q, g))
    recsql_run(spark, q, g, cold=True)  # untimed: the JIT, and the copy the first warm run reads
    times: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, dict[str, list[float]]] = {"cold": defaultdict(list), "warm": defaultdict(list)}
    load_start = measure.load()
    for _ in range(runs):
        for kind in ("recsql cold", "recsql warm", "DuckDB cold", "DuckDB warm", "Spark floor"):
            if kind.startswith("recsql"):
                seconds, split, answer = recsql_run(spark, q, g, cold=kind.endswith("cold"))
                if to_rows(answer) != expected:
                    raise AssertionError(f"{kind}: the answer differs from DuckDB's")
                for part, value in split.items():
                    parts[kind.split()[1]][part].append(value)
            elif kind == "DuckDB cold":
                started = time.perf_counter()
                con = duckdb_connection(g)
                answer = duckdb_run(con, q, g)
                seconds = time.perf_counter() - started
                con.close()
            elif kind == "DuckDB warm":
                started = time.perf_counter()
                answer = duckdb_run(warm_con, q, g)
                seconds = time.perf_counter() - started
            else:
                seconds = floor(spark, answer)
            times[kind].append(seconds)
    warm_con.close()
    edges.unpersist()
    return {"query": query, "scale": scale, "edges": g.m, "answer_rows": len(expected),
            "times": times, "parts": parts, "load": (load_start, measure.load())}


def tiny(spark, runs: int) -> dict:
    import recsql

    path = Path(tempfile.mkdtemp(prefix="recsql-tiny-")) / "edges.csv"
    path.write_text(TINY_EDGES)
    spark.read.options(header="true", inferSchema="true", comment="#").csv(str(path)) \
        .createOrReplaceTempView("edge")

    def statement() -> float:
        started = time.perf_counter()
        answer = recsql.sql(TINY, spark=spark).toArrow()
        seconds = time.perf_counter() - started
        if to_rows(answer) != TINY_ANSWER:
            raise AssertionError("the tiny SSSP's answer is wrong")
        return seconds

    def select_one() -> float:
        started = time.perf_counter()
        spark.sql("SELECT 1").toArrow()
        return time.perf_counter() - started

    def spark_recursion() -> float:
        started = time.perf_counter()
        answer = spark.sql(SPARK_RECURSION).toArrow()
        seconds = time.perf_counter() - started
        if sorted(answer.column(0).to_pylist()) != [1, 2, 3, 4, 5]:
            raise AssertionError("Spark's recursion's answer is wrong")
        return seconds

    for _ in range(3):  # warm: the copy kept, the JIT
        statement()
        select_one()
        spark_recursion()
    times: dict[str, list[float]] = defaultdict(list)
    load_start = measure.load()
    for _ in range(runs):
        times["recsql, 4-edge SSSP"].append(statement())
        times["Spark, SELECT 1"].append(select_one())
        times["Spark, 5-step UNION ALL recursion"].append(spark_recursion())
    return {"times": times, "load": (load_start, measure.load())}


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _cell(xs: list[float]) -> str:
    return f"{_median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def render(cases: list[dict], small: dict | None, started_load: str, runs: int) -> str:
    lines = ["# The driver path against DuckDB (issue 38, part 2)", "",
             *measure.stamp(started_load),
             f"- method: `benchmarks/driverpath.py`; {runs} interleaved rounds per case; median "
             "(min-max) seconds, each up to the answer in the driver, every answer checked "
             "against DuckDB's; the edge table cached in Spark; DuckDB runs "
             "shared/baselines/duckdb_queries.sql's formulation (engines/duckdb_engine.py)", ""]
    if cases:
        lines += ["| case | answer rows | recsql cold | recsql warm | DuckDB cold | DuckDB warm | "
                  "Spark floor | cold / DuckDB cold | warm / DuckDB warm | warm / (DuckDB warm + floor) "
                  "| load at start / end |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
        for c in cases:
            t = {k: _median(v) for k, v in c["times"].items()}
            lines.append(
                f"| {c['query'].upper()} 2^{c['scale']} ({c['edges']:,} edges) | {c['answer_rows']:,} | "
                + " | ".join(_cell(c["times"][k]) for k in ("recsql cold", "recsql warm", "DuckDB cold",
                                                             "DuckDB warm", "Spark floor"))
                + f" | {t['recsql cold'] / t['DuckDB cold']:.2f}x | {t['recsql warm'] / t['DuckDB warm']:.2f}x"
                f" | {t['recsql warm'] / (t['DuckDB warm'] + t['Spark floor']):.2f}x"
                f" | {c['load'][0]} / {c['load'][1]} |")
        lines += ["", "Where recsql's statement went (medians, seconds; `setup` holds parsing, "
                  "planning, sizing the relations and the identity check of a kept copy):", "",
                  "| case | state | " + " | ".join(PARTS) + " |", "|---|---|" + "--:|" * len(PARTS)]
        for c in cases:
            for state in ("cold", "warm"):
                lines.append(f"| {c['query'].upper()} 2^{c['scale']} | {state} | " + " | ".join(
                    f"{_median(c['parts'][state][p]):.3f}" for p in PARTS) + " |")
    if small:
        t = small["times"]
        lines += ["", "Tiny: SSSP over 4 edges (a CSV file registered as the CLI's `--table` does), "
                  f"warm, in-process, interleaved with Spark's `SELECT 1` and its own 5-step `UNION ALL` "
                  f"recursion; load {small['load'][0]} at "
                  f"the start, {small['load'][1]} at the end:", "",
                  "| statement | seconds |", "|---|--:|"]
        lines += [f"| {k} | {_cell(v)} |" for k, v in t.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks driver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", type=int, nargs="*", default=[16, 20])
    p.add_argument("--queries", nargs="+", default=["sssp", "cc"], choices=["sssp", "cc"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tiny-runs", type=int, default=15, help="0: no tiny case")
    p.add_argument("--out", default="benchmarks/RESULTS-driver.md")
    args = p.parse_args(argv)
    started_load = measure.load()
    spark, _, _ = measure.start_spark(2)
    cases = []
    small = tiny(spark, args.tiny_runs) if args.tiny_runs else None
    for scale in args.scales:
        for query in args.queries:
            cases.append(case(spark, query, scale, args.runs))
            Path(args.out).write_text(render(cases, small, started_load, args.runs))  # as it goes
            print(f"{query} 2^{scale} done", flush=True)
    Path(args.out).write_text(render(cases, small, started_load, args.runs))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
