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

    def run(self, w: Workload, deadline: float) -> Outcome:
        raise NotImplementedError

    def cancel(self) -> None:
        """Called from a watchdog thread when a run passes its deadline."""

    def cleanup(self, w: Workload) -> None:
        """Release per-workload resources."""


def to_rows(answer) -> set:
    """Canonical answer: set of tuples of Python ints, columns in SELECT order."""
    if isinstance(answer, dict):
        cols = [np.asarray(c).tolist() for c in answer.values()]
    else:  # pyarrow Table
        cols = [c.to_pylist() for c in answer.columns]
    return {tuple(int(x) for x in row) for row in zip(*cols)}


def all_engines() -> list[Engine]:
    from .careful import CarefulLoop
    from .duckdb_engine import DuckDBEngine
    from .loops import CacheLoop, CheckpointLoop
    from .recsql_engine import RecsqlEngine
    from .scipy_engine import ScipyEngine
    from .spark_native import SparkNativeEngine

    off = {"spark.recsql.endgame.enabled": "false"}
    # timed runs follow an untimed check run over the same table, so recsql reads the copy of
    # the base it kept from there (partitioned on Spark, or pulled to the driver; see
    # spark.recsql.base.keep); "nothing kept" and "base not kept" show a first statement's cost
    nothing_kept = {"spark.recsql.base.keep": "0"}
    return [RecsqlEngine("default settings", {}), RecsqlEngine("default, nothing kept", nothing_kept),
            RecsqlEngine("endgame off", off),
            RecsqlEngine("endgame off, base not kept", {**off, **nothing_kept}),
            RecsqlEngine("endgame off, shuffle joins", {**off, "spark.recsql.joinStrategy": "shuffle"}),
            RecsqlEngine("endgame off, skew on", {**off, "spark.recsql.skew.enabled": "true"}),
            CarefulLoop(), CheckpointLoop(),
            CacheLoop(), SparkNativeEngine(), DuckDBEngine(), ScipyEngine()]
