"""The per-case protocol of every matrix suite (`suites.Matrix`: queries x graphs x engines).

For every (query, graph): compute the oracle answer, load the edges once (parquet -> one cached
Spark DataFrame shared by all Spark engines), then
  1. a check run of every engine (also its warm-up; not timed): the answer must equal the oracle,
     else the engine is reported as a failure for this case and never timed;
  2. --warmup untimed rounds (default 0), then --runs timed rounds, engines interleaved
     A B C A B C ..., every answer checked again.
Writes the suite's results file (and benchmarks/out/<suite>.json) after every case.
"""
from __future__ import annotations

import gc
import json
import time
import traceback
from pathlib import Path

from . import graphs, measure, report
from .engines import TimedOut, Workload, to_rows
from .queries import ORACLES, QUERIES, graph_for


def one_run(engine, w, cap, mem):
    """Run once under a watchdog; returns a dict with seconds, outcome/err, peak memory."""
    # Python's collector only: a full JVM GC before each run (System.gc()) shrank the heap, and the
    # run after it re-grew it, 15% slower (recsql's Spark loop, RMAT 2^16 SSSP, medians of 8
    # interleaved runs: 2.58 s after a full GC, 2.25 s without), which no user's session pays
    try:
        engine.before_run(w)
    except Exception as ex:  # noqa: BLE001 - reported, not raised
        return {"status": "error", "detail": f"before the run: {type(ex).__name__}: {ex}"[:300],
                "seconds": 0.0, "mem": mem.read()}
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
    if rec.get("outcome") is not None and rec["outcome"].seconds is not None:
        rec["seconds"] = rec["outcome"].seconds
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
                         ran_on=out.ran_on, note=out.note, breakdown=out.breakdown)
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


def run_matrix(suite, cases, engines, opts, log) -> Path:
    """Run `cases` ((query, graph) pairs) on `engines` by the protocol above; write the results
    file after every case and return its path. `opts`: runs, warmup, caps, shuffle partitions,
    the file it writes (the runner's options over the suite's declaration)."""
    avail = {e.name: e.unavailable() for e in engines}
    for name, why in avail.items():
        if why:
            log(f"{name}: unavailable: {why}")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine = measure.machine()
    spark, t_session, t_first = measure.start_spark(opts.shuffle_partitions)
    mem = measure.PeakMemory()
    mem.find_jvm()
    for k in ("spark.sql.cteRecursionLevelLimit", "spark.sql.cteRecursionRowLimit"):
        spark.conf.set(k, "-1")  # for the native engine; no effect on the others
    meta = {"command": measure.command(), "suite": suite.name, "suite_desc": suite.description,
            "started": started, "machine": machine,
            "versions": measure.versions(spark), "jvm_startup_s": t_session,
            "first_job_s": t_first, "runs": opts.runs, "warmup": opts.warmup,
            "quick": suite.name == "quick", "cache_cap": opts.cache_cap, "run_cap": opts.run_cap,
            "spark_conf": {k: spark.conf.get(k) for k in (
                "spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                "spark.sql.adaptive.enabled", "spark.sql.ansi.enabled",
                "spark.sql.autoBroadcastJoinThreshold")},
            "engines": [{"name": e.name, "description": e.description,
                         "unavailable": avail[e.name]} for e in engines],
            "jvm_pid_found": mem.jvm is not None}
    log(f"Spark session {t_session:.1f} s, first job {t_first:.1f} s; JVM pid {mem.jvm}")

    results = []
    output = Path(opts.writes)
    out_json = graphs.OUT / f"{suite.name}.json"
    graphs.OUT.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    try:
        for qname, gname in cases:
            log(f"{qname} on {gname}")
            results.append(run_case(QUERIES[qname], gname, engines, avail, spark, mem, opts, log))
            meta["memory_reset_ok"] = mem.resettable
            meta["wall_s"] = time.perf_counter() - t_all
            meta["load_end"] = measure.load()
            out_json.write_text(json.dumps({"meta": meta, "cases": results}, indent=1, default=str))
            report.write(output, meta, results)
    finally:
        spark.stop()
    log(f"wrote {output} ({time.perf_counter() - t_all:.0f} s)")
    return output
