"""Every benchmark suite, by name, in one registry (as asv and pyperformance declare their cases).

A suite is either
- a `Matrix`: queries x graphs x engines, run by the one protocol of `run.py` (oracle answer,
  an untimed check run of every engine, then interleaved timed rounds, answers checked) and
  written by `report.py`, with each recsql statement's breakdown and every row's peak RSS; or
- an `Experiment`: a measurement of its own (servers, a BI tool, a long chain, processes per
  configuration), a module whose `main(argv)` runs it and writes its results file.

`python -m benchmarks SUITE [options]` runs one (`python -m benchmarks --list` lists them).

Where a suite's figures are kept: its `output`, a results file in benchmarks/ that a run writes
anew (committed); or, for an experiment whose conclusion is recorded, its `findings`, the heading
of the FINDINGS.md section holding the record, in which case a run writes
benchmarks/out/SUITE.md (uncommitted) to read against it. A suite with neither (`quick`, the
routine check) writes there too. tests/test_benchmarks.py holds files and declarations together.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

from .engines import OFF, Settings
from .queries import FULL_PLAN, QUICK_PLAN

DEFAULT = "recsql (default settings)"
COLD = "recsql (default settings, cold)"
ENDGAME_OFF = "recsql (endgame off)"
ENDGAME_OFF_COLD = "recsql (endgame off, cold)"
CAREFUL = "careful loop"
DUCKDB = "DuckDB"
NO_INDEX = Settings("endgame off, index off", (*OFF, ("spark.recsql.index.enabled", "false")))
NO_INDEX_COLD = Settings("endgame off, index off, cold", NO_INDEX.conf, cold=True)
GRAPHX_COLD = "GraphX (build + run)"
GRAPHX_WARM = "GraphX (run, graph built)"
# FINDINGS.md sections that keep several suites' records
GRAPHX_FINDINGS = "The Spark loop against GraphX (issue 38, part 1)"
AB_FINDINGS = "A/B of single settings"


def product(queries, graph_names) -> tuple[tuple[str, str], ...]:
    """Every query on every graph, query by query."""
    return tuple(itertools.product(queries, graph_names))


@dataclass(frozen=True)
class Matrix:
    name: str
    description: str
    cases: tuple[tuple[str, str], ...]  # (query, graph)
    engines: tuple = ()  # engine names (engines.names()) or engines.Settings; () = all
    runs: int = 3
    warmup: int = 0
    # one per core: the careful loop's fastest here (RMAT 2^16, 4 interleaved runs: SSSP 6.04 s
    # with 4, 5.78 s with 2; CC 3.24 s, 3.06 s), and recsql's state is capped at it anyway
    shuffle_partitions: int = field(default_factory=lambda: os.cpu_count() or 2)
    cache_cap: float = 300.0  # s per run of the `loop + cache` engine
    run_cap: float = 1800.0  # s per run of every other engine
    output: str = ""  # the committed results file a run writes
    findings: str = ""  # or the FINDINGS.md heading that keeps its record

    @property
    def writes(self) -> str:
        return results_file(self)


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    module: str  # benchmarks.<module>, whose main(argv) runs the experiment
    args: tuple[str, ...] = ()  # its default arguments (the runner's extra arguments follow)
    output: str = ""  # the committed results file a run writes
    findings: str = ""  # or the FINDINGS.md heading that keeps its record

    @property
    def writes(self) -> str:
        return results_file(self)


def results_file(suite: Matrix | Experiment) -> str:
    """Where a run of the suite writes: its committed file, else a scratch file beside the
    runner's raw figures."""
    return suite.output or f"benchmarks/out/{suite.name}.md"


SUITES: dict[str, Matrix | Experiment] = {s.name: s for s in [
    # -- routine
    Matrix("quick", "The routine small cases: SSSP on rmat-12, rmat-14, soc-Epinions1; CC on "
           "rmat-12; reachability on grid-60 and the bowtie (so the native recursive CTE runs).",
           QUICK_PLAN, cache_cap=20.0, run_cap=300.0),
    Matrix("full", "Every query on its graphs (`queries.FULL_PLAN`), every engine (hours).",
           tuple(FULL_PLAN), output="benchmarks/RESULTS.md"),
    # -- issue 29: big inputs
    Matrix("rmat20", "SSSP and CC at RMAT 2^20 on two graphs (the suite's `rmat-20`, and "
           "`rmat-20-seed7` from source 0): recsql's defaults warm (a later statement, reading the "
           "base copies kept by an earlier one) and cold (every kept copy dropped first: a "
           "session's first statement over the cached table), the Spark loop only (endgame off), "
           "the careful loop, DuckDB.",
           product(["sssp", "cc"], ["rmat-20", "rmat-20-seed7"]),
           (DEFAULT, COLD, ENDGAME_OFF, CAREFUL, DUCKDB), output="benchmarks/RESULTS-rmat20.md"),
    Matrix("rmat22", "SSSP at RMAT 2^22 (64M edges): the Spark loop only (endgame off) against "
           "the careful loop; whether it completes within the machine's memory.",
           product(["sssp"], ["rmat-22"]), (ENDGAME_OFF, CAREFUL), runs=2,
           run_cap=3600.0, output="benchmarks/RESULTS-rmat22.md"),
    # -- issue 38: the Spark path against GraphX
    Matrix("graphx", "SSSP and CC at RMAT 2^20, the Spark loop (endgame off) cold (a session's "
           "first statement over the cached table) and warm (a later one, reading the base copies "
           "an earlier one kept) against GraphX, its graph built and cached by an earlier run "
           "(warm) and built in the run (cold), and the careful loop; recsql without the adjacency "
           "index (`spark.recsql.index.enabled=false`: the flat base copy scanned) beside it. "
           "GraphX's CC reads the directed edges as undirected; the others read the symmetric table.",
           product(["sssp", "cc"], ["rmat-20"]),
           (ENDGAME_OFF_COLD, ENDGAME_OFF, NO_INDEX_COLD, NO_INDEX, GRAPHX_COLD, GRAPHX_WARM, CAREFUL),
           output="benchmarks/RESULTS-graphx.md"),
    Experiment("stages", "Where each iteration of the Spark loop spends its time, by Spark stage "
               "(the join side: scan, join, partial aggregate, shuffle write; the merge side: final "
               "aggregate, merge, checkpoint): task and CPU time, rows moved.", "stages",
               ("--query", "sssp", "--graph", "rmat-18", "--runs", "2"),
               findings=GRAPHX_FINDINGS),
    Experiment("directions", "The join side of one Spark-loop iteration three ways, by task CPU "
               "time: the scan of the base copy, the adjacency index, the base handed to Arrow on "
               "the executors (mapInArrow), for deltas of 0.1%, 10% and 80% of the vertices.",
               "directions", ("--graph", "rmat-18"), findings=GRAPHX_FINDINGS),
    Experiment("aggmap", "The partial aggregates' fast hash map as recsql sizes it (twice the "
               "relation's rows, 2^16 to 2^20 groups) against Spark's own (2^16), interleaved: a "
               "later statement's wall time and the task CPU time of its join and merge sides, "
               "SSSP and CC.", "aggmap",
               ("--graph", "rmat-18", "--runs", "3"), findings=GRAPHX_FINDINGS),
    Experiment("drivermem", "Driver memory per estimated byte: the Python process's peak RSS "
               "growth per phase of the endgame's driver fixpoint (pull, DuckDB iterations, write "
               "back) against recsql's estimate, SSSP and CC at RMAT 2^12 to 2^20, the transitive "
               "closure at 2^8 to 2^12, each case in its own process.", "drivermem",
               findings="Driver memory per estimated byte (drivermem)"),
    Matrix("cold16", "A cold statement (every kept base copy dropped first) against a warm one "
           "(the copies an earlier statement kept), SSSP and CC at RMAT 2^16, defaults and the "
           "Spark loop only.",
           product(["sssp", "cc"], ["rmat-16"]), (DEFAULT, COLD, ENDGAME_OFF, ENDGAME_OFF_COLD),
           runs=5, warmup=3, output="benchmarks/RESULTS-cold16.md"),
    # -- re-measuring the recorded findings (FINDINGS.md)
    Matrix("rmat16", "SSSP and CC at RMAT 2^16 against the careful loop, steady state.",
           product(["sssp", "cc"], ["rmat-16"]), (DEFAULT, ENDGAME_OFF, CAREFUL), runs=5,
           warmup=3, output="benchmarks/RESULTS-rmat16-sssp-cc.md"),
    Matrix("sizes", "SSSP and CC against the careful loop at every size below 2^16.",
           product(["sssp", "cc"], ["rmat-8", "rmat-12", "rmat-14", "grid-60", "bintree-down-12"]),
           (DEFAULT, ENDGAME_OFF, CAREFUL), findings="Against the careful loop at every size below 2^16"),
    Matrix("targets", "SSSP and CC on rmat-16 and soc-Epinions1: recsql against the hand-written "
           "loops with localCheckpoint.",
           product(["sssp", "cc"], ["rmat-16", "soc-Epinions1"]),
           (DEFAULT, ENDGAME_OFF, "loop + localCheckpoint", CAREFUL),
           findings="recsql against the localCheckpoint loop at RMAT 2^16 and soc-Epinions1"),
    Matrix("partitions", "The state's partition count on the Spark loop, in a session keeping "
           "Spark's default 200 shuffle partitions: recsql's cap (`auto`, one per core) against "
           "4 and 8.",
           product(["sssp", "cc"], ["rmat-16"]),
           (Settings("endgame off, partitions auto", OFF),  # the default: one per core
            *(Settings(f"endgame off, partitions {w}", (*OFF, ("spark.recsql.partitions", w)))
              for w in ("4", "8"))),
           runs=4, warmup=1, shuffle_partitions=200, findings="The state's partitions: one per core"),
    Matrix("doubling", "Recursive doubling against the linear rules for the transitive closure "
           "(endgame off): a deep chain, a binary tree pointing up, a shallow RMAT graph.",
           product(["tc"], ["chain-200", "bintree-up-12", "rmat-8"]),
           (Settings("endgame off, linear", (*OFF, ("spark.recsql.doubling.afterIterations", "0"))),
            Settings("endgame off, doubling after 8", OFF)),
           runs=2, findings="Recursive doubling for deep closures"),
    Matrix("skew", "Splitting heavy join keys (`spark.recsql.skew.enabled`) on and off, Spark "
           "loop only, SSSP at RMAT 2^14.",
           product(["sssp"], ["rmat-14"]), (ENDGAME_OFF, "recsql (endgame off, skew on)"),
           findings=AB_FINDINGS),
    Matrix("keep", "Keeping base copies across statements (warm) against dropping them before "
           "each statement (cold), Spark loop only, SSSP and CC at RMAT 2^16.",
           product(["sssp", "cc"], ["rmat-16"]), (ENDGAME_OFF, ENDGAME_OFF_COLD), runs=7,
           findings=AB_FINDINGS),
    Matrix("lookup", "The key lookup (`spark.recsql.lookup.enabled`) off and on, Spark loop "
           "only, SSSP and CC at RMAT 2^16.",
           product(["sssp", "cc"], ["rmat-16"]),
           (Settings("endgame off, lookup off", (*OFF, ("spark.recsql.lookup.enabled", "false"))),
            Settings("endgame off, lookup on", (*OFF, ("spark.recsql.lookup.enabled", "true")))),
           runs=7, findings=AB_FINDINGS),
    Experiment("floor", "Where one Spark-loop statement's time goes, against the floor of a Spark "
               "job on this machine (Spark's UI splits the tail iterations' jobs from the rest).",
               "breakdown", ("--query", "sssp", "--graph", "rmat-16", "--runs", "5"),
               findings="Where a Spark-loop statement's time goes, against Spark's floor"),
    Experiment("balance", "Heavy join keys split over partitions: each iteration's largest task "
               "over the average, with and without splitting (transitive closures).",
               "balance", ("--depths", "16"),
               findings="Splitting heavy join keys balances tasks but saves no time on 2 cores"),
    Experiment("rollover", "Iteration roll-over on the bowtie: the largest join output, peak "
               "memory and time per budget, each configuration in its own process.",
               "rollover", ("--graph", "bowtie-2000x50"),
               findings="Iteration roll-over lowers the largest join output, not peak memory"),
    # -- experiments of their own, current results files
    Experiment("coldstart", "A process's first recsql statement against its later ones, each "
               "session a fresh process (what `recsql -f` or a notebook's first query pays).", "cold",
               ("--query", "sssp", "--graph", "rmat-16", "--sessions", "2"),
               output="benchmarks/RESULTS-coldstart.md"),
    Experiment("chain", "Long-chain reachability: per-iteration time and driver memory over "
               "thousands of Spark iterations.", "chain", ("--nodes", "2000", "--endgame", "off"),
               findings="A long chain: per-iteration time and memory stay flat"),
    Experiment("server", "`recsql serve` beside Spark's Thrift server: round trip, first batch, "
               "fetch throughput, same PyHive client.", "server", ("--runs", "5"),
               output="benchmarks/SERVER.md"),
    Experiment("superset", "Superset SQL Lab round trips against `recsql serve`, beside PyHive.",
               "superset", ("--runs", "7", "--warmup", "3"), output="benchmarks/SUPERSET.md"),
    Experiment("driver", "The driver path against DuckDB in the same process (issue 38): SSSP and "
               "CC at RMAT 2^16 and 2^20 over a cached edge table, recsql cold and warm with its "
               "breakdown, DuckDB's formulation (shared/baselines/duckdb_queries.sql) cold and warm, "
               "Spark's floor for the answer; then the 4-edge SSSP against `SELECT 1`.", "driverpath",
               ("--runs", "3"), output="benchmarks/RESULTS-driver.md"),
    Experiment("refresh", "A materialized view's refresh against a full recompute (issue 40): SSSP "
               "with its predecessor, CC and reachability over RMAT edges; appends of 0.01%-10% "
               "and deletes of 0.1%, each refreshed with the incremental path on and then in full, "
               "cold and warm, every answer checked against scipy's.", "refresh",
               output="benchmarks/RESULTS-refresh.md"),
    Experiment("demand", "Demand-driven evaluation: one node's ancestors and reachable set through a closure "
               "view, with and without the rewrite, beside Spark and DuckDB.", "demand",
               ("--rmat", "12", "--tree-depth", "16", "--rounds", "3"),
               output="benchmarks/DEMAND.md"),
]}
