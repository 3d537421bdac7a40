"""Driver memory per estimated byte: what the endgame's driver fixpoint really holds, against
what recsql estimates it holds (`recsql.executor.endgame.decide`: `row_bytes`, `held_bytes`).

    python -m benchmarks drivermem [--cases sssp:rmat-16 cc:rmat-16 ...] [--out FILE]

The factors of `decide.HELD_PER_BYTE` come from its figures (FINDINGS.md, "Driver memory per
estimated byte"): re-run it after a change to what the driver fixpoint holds.

Each case (query x graph, recsql's default settings, the endgame on) runs in its own Python
process with its own JVM (local[2], 2 shuffle partitions, `--driver-memory`), so the kernel's
peak-RSS counter (VmHWM) is the statement's. The edge table is cached and registered as the
view `edge`, and a tiny recsql statement over another table runs first (imports, DuckDB loaded).
Then the case's statement runs twice: a session's first statement (nothing kept: it pulls the
edge table) and a later one (reading the Arrow copy the first kept).

The Python process's resident memory is read around the driver attempt's phases (the hooks
wrap the driver's own methods; the counter is reset between phases with /proc/self/clear_refs):
- before: RSS before the statement;
- pull: the peak while the relations are pulled (`df.toArrow()`), and what stays after it;
- fixpoint: the peak of the DuckDB iterations (its tables, hash tables and buffers);
- write back: the peak while the states go back to Spark (an Arrow copy of each).
Each is a growth over `before`. recsql's estimate is the relations' bytes and the final state's
bytes (rows x `row_bytes`), and `held_bytes` of both, which the decision holds against the
budget. The answer is checked against the oracle (scipy/networkx) after the measurements.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from benchmarks.measure import load, stamp

# relation-heavy (SSSP, CC: a small state over many edges) and state-heavy (a closure's state and
# candidates over few edges)
CASES = [*(f"{q}:rmat-{s}" for s in (12, 14, 16, 18, 20) for q in ("sssp", "cc")),
         *(f"tc:rmat-{s}" for s in (8, 10, 12))]
MIB = 1 << 20


def _kib(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


# -- one case, in a child process -----------------------------------------------------------------


class Phases(logging.Handler):
    """The driver attempt's phases, from the records the endgame gives each phase's start and
    end (`recsql.executor.endgame.driver.phases`, DEBUG): the peak is reset at a start and read
    at the end."""

    def __init__(self):
        from recsql.executor.endgame import driver

        super().__init__(logging.DEBUG)
        self.record: dict = {}
        self.before = 0
        driver.phases.addHandler(self)
        driver.phases.setLevel(logging.DEBUG)
        driver.phases.propagate = False  # the statement's log stays as it is

    def emit(self, entry: logging.LogRecord) -> None:
        name, edge, facts = entry.recsql_phase, entry.recsql_edge, entry.recsql_facts  # type: ignore[attr-defined]
        if edge == "start":
            _reset_peak()
            return
        growth = _kib("VmHWM") - self.before
        if name == "pull":
            self.add("pull_peak", growth)
            self.record["pull_after"] = _kib("VmRSS") - self.before
            self.record["arrow_bytes"] = self.record.get("arrow_bytes", 0) + facts["arrow_bytes"]
            if facts["arrow_chunks"] is not None:
                self.record["arrow_chunks"] = facts["arrow_chunks"]
        elif name == "fixpoint":
            self.record["fixpoint_peak"] = growth
            self.record["fixpoint_after"] = _kib("VmRSS") - self.before
            self.record.update(facts)
            _reset_peak()
        elif name == "write_back":
            self.record["write_peak"] = growth

    def add(self, key: str, value: int) -> None:
        self.record[key] = max(self.record.get(key, 0), value)

    def statement(self, sql: str, spark, conf: dict[str, str]) -> dict:
        import recsql

        self.record = {}
        self.before = _kib("VmRSS")
        _reset_peak()
        started = time.perf_counter()
        result = recsql.run(sql, spark=spark, conf=conf)
        seconds = time.perf_counter() - started
        # the largest growth of any phase (the counter was reset between them)
        self.record["statement_peak"] = max(
            _kib("VmHWM") - self.before,
            *(self.record.get(k, 0) for k in ("pull_peak", "fixpoint_peak", "write_peak")))
        self.record.update(seconds=seconds, before=self.before,
                           ran_on=sorted({s.ran_on for s in result.stats}))
        return {**self.record, "result": result}


def one(query_name: str, graph_name: str, source: int, driver_memory: str, conf: dict[str, str]) -> dict:
    from pyspark.sql import SparkSession

    import recsql
    from benchmarks import graphs
    from benchmarks.queries import ORACLES, QUERIES, graph_for
    from recsql.executor.endgame.decide import HELD_PER_BYTE, held_bytes

    query = QUERIES[query_name]
    graph_path = graphs.OUT / f"{graph_for(query, graph_name)}.v{graphs.FORMAT_VERSION}.parquet"
    spark = (SparkSession.builder.master("local[2]").appName("recsql-drivermem")
             .config("spark.driver.memory", driver_memory)
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    edges = spark.read.parquet(str(graph_path)).cache()
    rows = edges.count()
    edges.createOrReplaceTempView("edge")
    spark.createDataFrame([(1, 2, 1), (2, 3, 1)], "Src long, Dst long, Cost long").createOrReplaceTempView("tiny")
    recsql.run(QUERIES["sssp"].template.format(source=1).replace("edge", "tiny"), spark=spark).df.collect()
    phases = Phases()
    sql = query.template.format(source=source)
    cold = phases.statement(sql, spark, conf)
    warm = phases.statement(sql, spark, conf)
    answer = {tuple(int(v) for v in r.values()) for r in cold.pop("result").df.toArrow().to_pylist()}
    warm.pop("result")
    oracle = ORACLES[query.name](graphs.load(graph_for(query, graph_name)))
    spark.stop()
    for r in (cold, warm):
        r["held_est"] = held_bytes(r.get("state_est", 0), r.get("relations_est", 0))
    return {"query": query_name, "graph": graph_name, "edges": rows, "answer_rows": len(answer),
            "correct": answer == oracle, "factors": HELD_PER_BYTE, "cold": cold, "warm": warm}


# -- the driver: one child per case, then the report ----------------------------------------------


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks drivermem",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=CASES, metavar="QUERY:GRAPH")
    parser.add_argument("--driver-memory", default="8g", help="spark.driver.memory (JVM heap)")
    parser.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                        help="recsql settings for the statements (default: none, recsql's defaults)")
    parser.add_argument("--out", default="benchmarks/out/drivermem.md")
    parser.add_argument("--json", help="also write the raw records here")
    parser.add_argument("--one", nargs=3, metavar=("QUERY", "GRAPH", "SOURCE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(one(args.one[0], args.one[1], int(args.one[2]), args.driver_memory,
                                          dict(c.split("=", 1) for c in args.conf)), default=str), flush=True)
        return
    from benchmarks import graphs
    from benchmarks.queries import QUERIES, graph_for

    started_load = load()
    records = []
    for case in args.cases:
        query, graph = case.split(":")
        g = graphs.load(graph_for(QUERIES[query], graph))
        g.parquet()  # written here, not in the child
        source = g.source
        graphs._cache.clear()
        out = subprocess.run([sys.executable, "-m", "benchmarks.drivermem", "--driver-memory",
                              args.driver_memory, "--conf", *args.conf, "--one", query, graph, str(source)],
                             capture_output=True, text=True, check=False, env={**os.environ})
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        record = json.loads(line[len("RESULT "):]) if line else {
            "query": query, "graph": graph, "error": out.stderr.strip()[-2000:]}
        records.append(record)
        print(json.dumps(record), file=sys.stderr, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(records, indent=1))
    Path(args.out).write_text(report(args, started_load, records))


def report(args, started_load: str, records: list[dict]) -> str:
    lines = [
        "# Driver memory per estimated byte",
        "",
        *stamp(started_load),
        f"- each case its own process and JVM: local[2], 2 shuffle partitions, "
        f"`spark.driver.memory={args.driver_memory}`, "
        + (f"recsql settings {' '.join(args.conf)}" if args.conf else "recsql's defaults (endgame on)"),
        "- MiB of the Python process's resident memory over its RSS before the statement (VmHWM, "
        "reset between phases); est.: recsql's estimate (rows x `row_bytes`); held est.: "
        "`held_bytes` of the final state and the relations, which the decision holds against the "
        "budget; peak / est.: the statement's peak growth over the estimated bytes "
        "(relations + state)",
        "",
        "| query | graph | edges | statement | correct | ran on | relations est. | state est. | "
        "held est. | pull peak | after pull | fixpoint peak | write-back peak | statement peak | "
        "peak / est. | peak / held est. | s |",
        "|---|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        if "error" in r:
            last = r["error"].splitlines()[-1] if r["error"] else "?"
            lines.append(f"| {r['query']} | {r['graph']} | | | failed: {last} |")
            continue
        for kind in ("cold", "warm"):
            p = r[kind]
            est = p.get("relations_est", 0) + p.get("state_est", 0)
            mib = partial(_mib, p)
            lines.append(
                f"| {r['query']} | {r['graph']} | {r['edges']:,} | {kind} | "
                f"{'yes' if r['correct'] else 'NO'} | {'+'.join(p['ran_on'])} | "
                f"{mib('relations_est')} | {mib('state_est')} | {mib('held_est')} | {mib('pull_peak')} | "
                f"{mib('pull_after')} | {mib('fixpoint_peak')} | {mib('write_peak')} | "
                f"{mib('statement_peak')} | {p['statement_peak'] / est:.2f} | "
                f"{p['statement_peak'] / max(p['held_est'], 1):.2f} | {p['seconds']:.1f} |"
                if est else f"| {r['query']} | {r['graph']} | {r['edges']:,} | {kind} | | "
                f"{'+'.join(p['ran_on'])} | not on the driver |")
    return "\n".join(lines) + "\n"


def _mib(record: dict, key: str) -> str:
    return f"{record[key] / MIB:,.0f}" if key in record else "–"


if __name__ == "__main__":  # the child process of one case (`--one`)
    main()
