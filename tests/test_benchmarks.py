"""The benchmark runner's registry resolves, its statement breakdown adds up, and a tiny matrix
suite runs end to end (`python -m benchmarks`; the timings themselves are not tested)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import graphs
from benchmarks.__main__ import main as runner
from benchmarks.engines import Settings, names, resolve
from benchmarks.engines.recsql_engine import breakdown
from benchmarks.queries import QUERIES
from benchmarks.suites import SUITES, Experiment, Matrix
from recsql.executor.loop.stats import IterationStats
from recsql.settings import KEYS, PREFIX

ROOT = Path(__file__).resolve().parent.parent
MATRICES = [s for s in SUITES.values() if isinstance(s, Matrix)]
EXPERIMENTS = [s for s in SUITES.values() if isinstance(s, Experiment)]


def test_the_issue_suites_are_declared():
    assert {"quick", "rmat20", "rmat22", "cold16", "server", "superset", "demand", "chain"} <= set(SUITES)
    rmat20 = SUITES["rmat20"]
    assert {g for _, g in rmat20.cases} == {"rmat-20", "rmat-20-seed7"}
    assert {q for q, _ in rmat20.cases} == {"sssp", "cc"}
    assert set(rmat20.engines) == {"recsql (default settings)", "recsql (default settings, cold)",
                                   "recsql (endgame off)", "careful loop", "DuckDB"}


def test_every_results_file_is_a_suites_and_every_suite_keeps_its_figures():
    """A committed results file is written by one suite; a suite's figures are its committed
    file or a section of FINDINGS.md (whose runs write to benchmarks/out/, uncommitted)."""
    here = ROOT / "benchmarks"
    committed = {f"benchmarks/{p.name}" for p in here.glob("*.md")} - {
        "benchmarks/README.md", "benchmarks/FINDINGS.md"}
    outputs = [s.output for s in SUITES.values() if s.output]
    assert len(outputs) == len(set(outputs)), "two suites write one file"
    assert committed - set(outputs) == set(), "results files no suite writes"
    headings = {line[3:] for line in (here / "FINDINGS.md").read_text().splitlines()
                if line.startswith("## ")}
    for suite in SUITES.values():
        assert not (suite.output and suite.findings), suite.name
        if suite.output:
            assert suite.output in committed, f"{suite.name}: {suite.output} not committed"
        else:
            assert suite.writes == f"benchmarks/out/{suite.name}.md"
        assert not suite.findings or suite.findings in headings, f"{suite.name}: no section {suite.findings!r}"


@pytest.mark.parametrize("suite", MATRICES, ids=lambda s: s.name)
def test_a_matrix_suite_names_queries_graphs_and_engines_that_exist(suite):
    assert suite.cases and suite.runs >= 1
    for query, graph in suite.cases:
        assert query in QUERIES
        assert graph in graphs.BUILDERS
    engines = resolve(suite.engines or names())
    assert len({e.name for e in engines}) == len(engines), "an engine named twice"
    for spec in suite.engines:
        if isinstance(spec, Settings):  # every setting is one recsql reads, with a valid value
            for key, value in spec.conf:
                assert key.startswith(PREFIX) and key[len(PREFIX):] in KEYS, key
                KEYS[key[len(PREFIX):]][2](value)


@pytest.mark.parametrize("suite", EXPERIMENTS, ids=lambda s: s.name)
def test_an_experiment_suite_names_a_module_with_main_and_a_results_file(suite, capsys):
    module = importlib.import_module(f"benchmarks.{suite.module}")
    assert callable(module.main)
    # the runner passes `--out FILE` with the suite's own arguments: the module must take it
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    assert "--out" in capsys.readouterr().out


def test_an_unknown_engine_is_refused():
    with pytest.raises(KeyError, match="unknown engine 'recsql \\(nope\\)'"):
        resolve(["recsql (nope)"])


def test_dry_run_lists_cases_and_engines(capsys):
    runner(["rmat20", "--dry-run"])
    out = capsys.readouterr().out
    assert "sssp on rmat-20-seed7" in out and "cc on rmat-20" in out
    assert "recsql (default settings, cold)" in out and "DuckDB" in out


def stats(**kw) -> IterationStats:
    fields = dict(cte="p", iteration=1, delta_rows=1, total_rows=1, seconds=0.0, join_strategy="-")
    return IterationStats(**{**fields, **kw})


def test_breakdown_of_a_statement_adds_up_to_its_time():
    # a Spark base step, one Spark iteration, then two driver iterations that pulled first and
    # wrote back last; times chosen by hand
    spark0 = stats(iteration=0, seconds=0.5, driver_seconds=0.25, job_seconds=0.25, base_seconds=0.125)
    spark1 = stats(iteration=1, seconds=1.0, driver_seconds=0.375, job_seconds=0.625)
    driver2 = stats(iteration=2, seconds=2.0, ran_on="driver", join_strategy="driver", pull_seconds=1.5)
    driver3 = stats(iteration=3, seconds=0.25, ran_on="driver", join_strategy="driver", write_seconds=0.5)
    parts = breakdown([spark0, spark1, driver2, driver3], total=5.0, fetch=0.25)
    assert parts == {"pull": 1.5, "fixpoint_driver": 0.75, "fixpoint_spark": 0.875, "write_back": 0.5,
                     "base_copies": 0.125, "analysis": 0.5, "fetch": 0.25, "setup": 0.5}
    assert sum(parts.values()) == 5.0


@pytest.mark.slow  # a Spark session of its own: 130 s on the loaded 2-core machine
def test_the_quick_runner_runs_a_tiny_case_end_to_end(tmp_path):
    """One query on RMAT 2^8, recsql warm and cold and DuckDB, one timed run: the results file
    carries the command, the commit, each answer checked, the breakdown and peak RSS."""
    out = tmp_path / "RESULTS.md"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "quick", "--queries", "sssp", "--graphs", "rmat-8",
         "--engines", "recsql (default settings", "DuckDB", "--runs", "1", "--output", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "Generated by `python -m benchmarks quick --queries sssp --graphs rmat-8" in text
    assert "recsql commit " in text and "Load average" in text
    details = text[text.index("### sssp on rmat-8"):]
    for engine in ("recsql (default settings)", "recsql (default settings, cold)", "DuckDB"):
        assert f"| {engine} | ok |" in details  # its answers equal the oracle's
    assert "Breakdown per statement" in details and "| recsql (default settings, cold) | " in details
