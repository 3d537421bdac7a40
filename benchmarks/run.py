"""One command for the whole suite:  python -m benchmarks.run [--quick] [--queries ...] [--graphs ...]

For every (query, graph): compute the oracle answer, load the edges once (parquet -> one cached
Spark DataFrame shared by all Spark engines), then
  1. a check run of every engine (also its warm-up; not timed): the answer must equal the oracle,
     else the engine is reported as a failure for this case and never timed;
  2. --warmup untimed rounds (default 0), then --runs timed rounds, engines interleaved
     A B C A B C ..., every answer checked again.
Writes benchmarks/RESULTS.md (and benchmarks/out/results.json) after every case.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

from . import graphs, measure, report
from .engines import TimedOut, Workload, all_engines, to_rows
from .queries import FULL_PLAN, ORACLES, QUERIES, QUICK_PLAN, graph_for

HERE = Path(__file__).resolve().parent


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small graphs, a few minutes")
    p.add_argument("--queries", nargs="+", choices=sorted(QUERIES), help="only these queries")
    p.add_argument("--graphs", nargs="+", help=f"only these graphs: {', '.join(graphs.BUILDERS)}")
    p.add_argument("--engines", nargs="+", help="only engines whose name contains one of these")
    p.add_argument("--runs", type=int, default=3, help="timed runs per engine (default 3)")
    # the JVM's JIT takes several runs to settle: in one session at RMAT 2^16, recsql's Spark loop
    # took 3.5, 3.1, 2.8, 2.7 s in its first four SSSP runs and 2.0-2.1 s from its tenth on
    p.add_argument("--warmup", type=int, default=0,
                   help="untimed interleaved rounds after the check runs (default 0), for steady-state "
                        "figures")
    # one per core: the careful loop's fastest here (RMAT 2^16, 4 interleaved runs: SSSP 6.04 s
    # with 4, 5.78 s with 2; CC 3.24 s, 3.06 s), and recsql's state is capped at it anyway
    p.add_argument("--shuffle-partitions", type=int, default=os.cpu_count() or 2,
                   help="the session's spark.sql.shuffle.partitions (default: one per core)")
    p.add_argument("--cache-cap", type=float, help="per-run cap for the cache() loop, s "
                   "(default 300, --quick 20)")
    p.add_argument("--run-cap", type=float, help="per-run cap for every other engine, s "
                   "(default 1800, --quick 300)")
    p.add_argument("--output", default=str(HERE / "RESULTS.md"))
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be >= 1")
    a.cache_cap = a.cache_cap or (20.0 if a.quick else 300.0)
    a.run_cap = a.run_cap or (300.0 if a.quick else 1800.0)
    return a


def cases(args):
    """The (query, graph) pairs to run: with both --queries and --graphs, every named query on every
    named graph; otherwise the plan's pairs that match the one given, and sssp and reach on named
    graphs outside the plan."""
    for gname in args.graphs or []:
        if gname not in graphs.BUILDERS:
            sys.exit(f"unknown graph {gname!r}; known: {', '.join(graphs.BUILDERS)}")
    if args.queries and args.graphs:
        for qname in args.queries:
            for gname in args.graphs:
                yield QUERIES[qname], gname
        return
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    for qname, gname in plan:
        if (args.queries and qname not in args.queries) or (args.graphs and gname not in args.graphs):
            continue
        yield QUERIES[qname], gname
    if args.graphs:  # graphs named explicitly but outside the plan: run sssp and reach on them
        planned = {g for _, g in plan}
        for gname in args.graphs:
            if gname not in planned:
                for qname in ["sssp", "reach"]:
                    yield QUERIES[qname], gname


def one_run(engine, w, cap, mem):
    """Run once under a watchdog; returns a dict with seconds, outcome/err, peak memory."""
    # Python's collector only: a full JVM GC before each run (System.gc()) shrank the heap, and the
    # run after it re-grew it, 15% slower (recsql's Spark loop, RMAT 2^16 SSSP, medians of 8
    # interleaved runs: 2.58 s after a full GC, 2.25 s without), which no user's session pays
    gc.collect()
    mem.reset()
    deadline = time.monotonic() + cap
    rec = {"status": "ok"}
    with measure.Watchdog(cap, engine.cancel):
        t0 = time.perf_counter()
        try:
            rec["outcome"] = engine.run(w, deadline)
        except TimedOut as ex:
            rec.update(status="timed out", detail=str(ex), iterations=ex.iterations)
        except Exception as ex:  # noqa: BLE001 - reported, not raised
            if time.monotonic() > deadline:
                rec.update(status="timed out", detail=f"timed out after {cap:.0f} s (cancelled)")
            else:
                msg = str(ex).strip().splitlines()[0] if str(ex).strip() else ""
                rec.update(status="error", detail=f"{type(ex).__name__}: {msg[:300]}",
                           trace=traceback.format_exc(limit=3))
        rec["seconds"] = time.perf_counter() - t0
    rec["mem"] = mem.read()
    return rec


def check(rec, oracle):
    """Answer check, outside the timed region."""
    if rec["status"] != "ok":
        return
    rows = to_rows(rec["outcome"].answer)
    if rows != oracle:
        missing, extra = sorted(oracle - rows)[:3], sorted(rows - oracle)[:3]
        rec.update(status="wrong answer",
                   detail=f"{len(rows)} rows vs oracle {len(oracle)}; missing e.g. {missing}; "
                          f"extra e.g. {extra}")


def run_case(q, gname, engines, avail, spark, mem, args, log):
    g = graphs.load(graph_for(q, gname))
    t = time.perf_counter()
    oracle = ORACLES[q.name](g)
    case = {"query": q.name, "query_desc": q.description, "sql": q.sql(g), "graph": g.name,
            "graph_desc": g.description, "vertices": int(len(set(g.src.tolist()) | set(g.dst.tolist()))),
            "edges": g.m, "answer_rows": len(oracle), "oracle_seconds": time.perf_counter() - t,
            "engines": {}}
    edges = spark.read.parquet(str(g.parquet())).cache()
    edges.count()
    w = Workload(q, g, spark, edges)
    active = []
    for e in engines:
        res = case["engines"][e.name] = {"runs": [], "status": None}
        if avail[e.name]:
            res.update(status="unavailable", detail=avail[e.name])
        elif reason := e.cannot(w):
            res.update(status="cannot express", detail=reason)
        else:
            e.prepare(w)
            active.append(e)

    def record(e, rec, timed):
        res = case["engines"][e.name]
        check(rec, oracle)
        out = rec.pop("outcome", None)
        entry = {"seconds": rec["seconds"], "status": rec["status"], "mem": rec["mem"]}
        if out is not None:
            entry.update(iterations=out.iterations, iter_seconds=out.iter_seconds,
                         ran_on=out.ran_on, note=out.note)
        if rec["status"] != "ok":
            res.update(status=rec["status"], detail=rec.get("detail"), failed_run=entry,
                       iterations=rec.get("iterations"))
            log(f"    {e.name}: {rec['status']}: {rec.get('detail')}")
            return False
        if timed:
            res["runs"].append(entry)
        elif "check_run" not in res:  # a warm-up round is checked, not recorded
            res["check_run"] = entry
        return True

    cap = {e.name: (args.cache_cap if e.name == "loop + cache" else args.run_cap) for e in active}
    log(f"  check runs ({len(oracle)} oracle rows)")
    passing = [e for e in active if record(e, one_run(e, w, cap[e.name], mem), timed=False)]
    for r in range(args.warmup + args.runs):
        timed = r >= args.warmup
        label = f"round {r - args.warmup + 1}/{args.runs}" if timed else f"warm-up {r + 1}/{args.warmup}"
        log(f"  {label}: " + ", ".join(e.name for e in passing))
        for e in list(passing):
            if not record(e, one_run(e, w, cap[e.name], mem), timed=timed):
                passing.remove(e)
    for e in active:
        if case["engines"][e.name]["status"] is None:
            case["engines"][e.name]["status"] = "ok"
        e.cleanup(w)
    edges.unpersist()
    return case


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    command = "python -m benchmarks.run" + ("" if not argv else " " + " ".join(argv))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    def log(msg):
        print(msg, flush=True)

    engines = all_engines()
    if args.engines:
        engines = [e for e in engines if any(s.lower() in e.name.lower() for s in args.engines)]
    avail = {e.name: e.unavailable() for e in engines}
    for name, why in avail.items():
        if why:
            log(f"{name}: unavailable: {why}")

    spark, t_session, t_first = measure.start_spark(args.shuffle_partitions)
    mem = measure.PeakMemory()
    mem.find_jvm()
    for k in ("spark.sql.cteRecursionLevelLimit", "spark.sql.cteRecursionRowLimit"):
        spark.conf.set(k, "-1")  # for the native engine; no effect on the others
    meta = {"command": command, "started": started, "machine": measure.machine(),
            "versions": measure.versions(spark), "jvm_startup_s": t_session,
            "first_job_s": t_first, "runs": args.runs, "warmup": args.warmup, "quick": args.quick,
            "cache_cap": args.cache_cap, "run_cap": args.run_cap,
            "spark_conf": {k: spark.conf.get(k) for k in (
                "spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                "spark.sql.adaptive.enabled", "spark.sql.ansi.enabled",
                "spark.sql.autoBroadcastJoinThreshold")},
            "engines": [{"name": e.name, "description": e.description,
                         "unavailable": avail[e.name]} for e in engines],
            "jvm_pid_found": mem.jvm is not None}
    log(f"Spark session {t_session:.1f} s, first job {t_first:.1f} s; JVM pid {mem.jvm}")

    results = []
    out_json = graphs.OUT / "results.json"
    graphs.OUT.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    for q, gname in cases(args):
        log(f"{q.name} on {gname}")
        results.append(run_case(q, gname, engines, avail, spark, mem, args, log))
        meta["memory_reset_ok"] = mem.resettable
        meta["wall_s"] = time.perf_counter() - t_all
        meta["load_end"] = measure.load()
        out_json.write_text(json.dumps({"meta": meta, "cases": results}, indent=1, default=str))
        report.write(Path(args.output), meta, results)
    log(f"wrote {args.output} ({time.perf_counter() - t_all:.0f} s)")
    spark.stop()


if __name__ == "__main__":
    main()
