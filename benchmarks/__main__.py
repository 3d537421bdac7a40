"""The benchmark runner: one command, named suites (`suites.py`).

    python -m benchmarks --list                      # the suites
    python -m benchmarks quick                       # the routine small cases
    python -m benchmarks rmat20 --runs 3             # a suite with its declaration overridden
    python -m benchmarks quick --queries sssp --graphs rmat-10 --engines "recsql (default settings)"
    python -m benchmarks SUITE --dry-run             # what it would run, without running it
    python -m benchmarks server --runs 3             # an experiment: its own options follow
    python -m benchmarks server --help               # an experiment's own options

Every results file starts with the command that wrote it, the commit, the machine, its load
average and the versions.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from . import graphs, measure, report
from .engines import names as engine_names
from .engines import resolve
from .queries import QUERIES
from .suites import SUITES, Experiment, Matrix


def parser(matrix: bool, add_help: bool = True) -> argparse.ArgumentParser:
    """The runner's options; with `matrix`, a matrix suite's too (an experiment suite takes its
    own options after the runner's, so those are not parsed here)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__, allow_abbrev=False,
                                add_help=add_help, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", nargs="?", choices=sorted(SUITES), metavar="SUITE",
                   help="one of: " + ", ".join(SUITES))
    p.add_argument("--list", action="store_true", help="list the suites and exit")
    p.add_argument("--dry-run", action="store_true", help="show what the suite runs; run nothing")
    p.add_argument("--output", help="the results file (default: the suite's)")
    if not matrix:
        return p
    g = p.add_argument_group("matrix suites (an experiment suite takes its own options instead)")
    g.add_argument("--queries", nargs="+", choices=sorted(QUERIES), help="only these queries")
    g.add_argument("--graphs", nargs="+", help="these graphs instead of the suite's (with "
                   "--queries, every query on every graph): " + ", ".join(graphs.BUILDERS))
    g.add_argument("--engines", nargs="+", help="only engines whose name contains one of these")
    g.add_argument("--runs", type=int, help="timed runs per engine")
    g.add_argument("--warmup", type=int, help="untimed interleaved rounds after the check runs")
    g.add_argument("--shuffle-partitions", type=int, help="the session's spark.sql.shuffle.partitions")
    g.add_argument("--cache-cap", type=float, help="per-run cap for the cache() loop, s")
    g.add_argument("--run-cap", type=float, help="per-run cap for every other engine, s")
    g.add_argument("--render", action="store_true",
                   help="re-render the results file from benchmarks/out/SUITE.json; run nothing")
    return p


def matrix_plan(suite: Matrix, a):
    """(suite with the options applied, its cases, its engines)."""
    if a.graphs:
        unknown = [g for g in a.graphs if g not in graphs.BUILDERS]
        if unknown:
            sys.exit(f"unknown graph(s) {', '.join(unknown)}; known: {', '.join(graphs.BUILDERS)}")
    cases = list(suite.cases)
    if a.queries and a.graphs:
        cases = [(q, g) for q in a.queries for g in a.graphs]
    elif a.queries:
        cases = [(q, g) for q, g in cases if q in a.queries]
    elif a.graphs:
        cases = [(q, g) for g in a.graphs for q in dict.fromkeys(q for q, _ in suite.cases)]
    engines = resolve(suite.engines or engine_names())
    if a.engines:
        engines = [e for e in engines if any(s.lower() in e.name.lower() for s in a.engines)]
    overrides = {k: getattr(a, k) for k in ("runs", "warmup", "shuffle_partitions", "cache_cap",
                                            "run_cap", "output") if getattr(a, k) is not None}
    suite = replace(suite, **overrides)
    if suite.runs < 1:
        sys.exit("--runs must be >= 1")
    return suite, cases, engines


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    a, extra = parser(matrix=False, add_help=False).parse_known_args(argv)
    if a.suite is None or isinstance(SUITES[a.suite], Matrix):
        a = parser(matrix=True).parse_args(argv)
    if a.list or not a.suite:
        for name, s in SUITES.items():
            kind = "matrix" if isinstance(s, Matrix) else f"experiment ({s.module}.py)"
            print(f"{name:11} {kind}: {s.description}")
        return
    suite = SUITES[a.suite]
    measure.COMMAND = "python -m benchmarks " + " ".join(shlex.quote(x) for x in argv)

    if isinstance(suite, Experiment):
        out = a.output or suite.writes
        Path(out).parent.mkdir(parents=True, exist_ok=True)  # benchmarks/out/ on a fresh clone
        args = [*suite.args, "--out", out, *extra]
        if a.dry_run:
            print(f"{suite.name}: benchmarks.{suite.module}.main({args})")
            return
        import importlib

        importlib.import_module(f"benchmarks.{suite.module}").main(args)
        return

    suite, cases, engines = matrix_plan(suite, a)
    if a.render:
        data = json.loads((graphs.OUT / f"{suite.name}.json").read_text())
        report.write(Path(suite.writes), data["meta"], data["cases"])
        print(f"wrote {suite.writes}")
        return
    if a.dry_run:
        print(f"{suite.name} -> {suite.writes}: {suite.runs} timed runs after {suite.warmup} "
              f"warm-up rounds, shuffle partitions {suite.shuffle_partitions}")
        print("  cases: " + ", ".join(f"{q} on {g}" for q, g in cases))
        print("  engines: " + ", ".join(e.name for e in engines))
        return
    from .run import run_matrix

    run_matrix(suite, cases, engines, suite, lambda msg: print(msg, flush=True))


if __name__ == "__main__":
    main()
