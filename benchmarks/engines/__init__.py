"""Engines under test. Each engine maps (query, graph) to an answer, timed by the harness.

`Engine.run` must do all of the work inside the timed region, including bringing the answer to
the driver (as a pyarrow Table or a dict of numpy columns); converting it to a set of tuples for
the answer check happens outside the timed region (`to_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class TimedOut(Exception):
    def __init__(self, iterations: int, seconds: float, why: str = ""):
        super().__init__(f"timed out after {iterations} iterations ({seconds:.0f} s"
                         + (f"; {why})" if why else ")"))
        self.iterations = iterations
        self.seconds = seconds


@dataclass
class Outcome:
    answer: Any                       # pyarrow.Table | dict[str, np.ndarray]
    iterations: int | None = None     # recursive steps evaluated (incl. the final empty one)
    iter_seconds: list[float] = field(default_factory=list)
    ran_on: str = ""                  # where the iterations ran, e.g. "spark x9" or "driver x3, spark x6"
    note: str = ""
    breakdown: dict[str, float] | None = None  # recsql: where the statement's seconds went
    # the engine's own measure, where the wall clock around `run` would count work outside it
    # (GraphX: the request to its process, writing the answer for the check)
    seconds: float | None = None


@dataclass
class Workload:
    """Everything an engine may use for one (query, graph); built once, outside the timing."""
    query: Any        # queries.Query
    graph: Any        # graphs.Graph
    spark: Any = None
    edges: Any = None  # cached Spark DataFrame (Src, Dst, Cost), shared by all Spark engines


class Engine:
    name = "?"
    spark_based = False
    description = ""

    def unavailable(self) -> str | None:
        """None if the engine can run at all, else the reason."""
        return None

    def cannot(self, w: Workload) -> str | None:
        """None if the engine can express this query on this graph, else why not."""
        return None

    def prepare(self, w: Workload) -> None:
        """Per-workload set-up outside the timing (e.g. loading tables)."""

    def before_run(self, w: Workload) -> None:
        """Set-up before each run, outside the timing (e.g. dropping what earlier runs kept)."""

    def run(self, w: Workload, deadline: float) -> Outcome:
        raise NotImplementedError

    def cancel(self) -> None:
        """Called from a watchdog thread when a run passes its deadline."""

    def cleanup(self, w: Workload) -> None:
        """Release per-workload resources."""


class SparkEngine(Engine):
    """An engine on the shared SparkSession: `run` sets `_spark`, and a watchdog that finds the
    run past its deadline cancels its jobs."""
    spark_based = True
    _spark = None

    def cancel(self) -> None:
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()


def to_rows(answer) -> set:
    """Canonical answer: set of tuples of Python ints, columns in SELECT order."""
    if isinstance(answer, dict):
        cols = [np.asarray(c).tolist() for c in answer.values()]
    else:  # pyarrow Table
        cols = [c.to_pylist() for c in answer.columns]
    return {tuple(int(x) for x in row) for row in zip(*cols)}


@dataclass(frozen=True)
class Settings:
    """A recsql engine declared by its settings alone (a suite's A/B variants): shown as
    `recsql (label)`."""
    label: str
    conf: tuple[tuple[str, str], ...] = ()
    cold: bool = False

    @property
    def name(self) -> str:
        return f"recsql ({self.label})"


OFF = (("spark.recsql.endgame.enabled", "false"),)

# the named recsql engines: timed runs follow an untimed check run over the same table, so a
# warm engine reads the copies of the base it kept from an earlier statement (partitioned on
# Spark, or pulled to the driver; see spark.recsql.base.keep); a cold one drops every kept copy
# before each run, as a session's first statement over a cached table finds none
RECSQL = [
    Settings("default settings"),
    Settings("default settings, cold", cold=True),
    Settings("endgame off", OFF),
    Settings("endgame off, cold", OFF, cold=True),
    Settings("endgame off, shuffle joins", (*OFF, ("spark.recsql.joinStrategy", "shuffle"))),
    Settings("endgame off, skew on", (*OFF, ("spark.recsql.skew.enabled", "true"))),
]


def all_engines() -> list[Engine]:
    """Every engine of the full suite, in the order the reports show them."""
    from .careful import CarefulLoop
    from .duckdb_engine import DuckDBEngine
    from .graphx import GraphXEngine
    from .loops import CacheLoop, CheckpointLoop
    from .scipy_engine import ScipyEngine
    from .spark_native import SparkNativeEngine

    return [*(recsql_with(s) for s in RECSQL), CarefulLoop(), CheckpointLoop(), CacheLoop(),
            SparkNativeEngine(), DuckDBEngine(), ScipyEngine(), GraphXEngine(warm=False),
            GraphXEngine(warm=True)]


def recsql_with(settings: Settings) -> Engine:
    from .recsql_engine import RecsqlEngine

    return RecsqlEngine(settings.label, dict(settings.conf), cold=settings.cold)


def names() -> list[str]:
    return [e.name for e in all_engines()]


def resolve(specs) -> list[Engine]:
    """Engines for a suite: each spec an engine's exact name or a `Settings`."""
    known = {e.name: e for e in all_engines()}
    out = []
    for spec in specs:
        if isinstance(spec, Settings):
            out.append(recsql_with(spec))
        elif spec in known:
            out.append(known[spec])
        else:
            raise KeyError(f"unknown engine {spec!r}; known: {', '.join(known)}")
    return out
