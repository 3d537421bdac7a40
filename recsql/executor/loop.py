"""What the strategies (roll-over, recovery, the endgame, the balancer) see of a running
fixpoint: the statement's `Context` and the `Loop` protocol that `fixpoint.GroupRun`
implements. A leaf below them all, so no strategy imports the loop back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from recsql.executor.limits import SparkLimits
from recsql.executor.state import RelationState
from recsql.executor.stats import IterationStats
from recsql.planner.model import Branch, CTEPlan, GroupStep
from recsql.settings import Settings


@dataclass
class Context:
    """What a fixpoint needs from the statement being run."""

    spark: SparkSession
    settings: Settings
    partitions: int
    args: dict | None
    sql: str  # the user's statement, for error messages
    env: dict[str, DataFrame]  # bindings of completed CTEs and keyword DataFrames
    bases: dict[tuple[str, tuple[str, ...]], DataFrame]  # pre-partitioned base tables
    base_sizes: dict[tuple[str, tuple[str, ...]], list[int]] = field(default_factory=dict)
    base_keys: dict[tuple[str, tuple[str, ...]], tuple[dict, int]] = field(default_factory=dict)
    on_iteration: Callable[[IterationStats], None] | None = None
    # a recovery.Recovery (reliable checkpoints and resume), or None; untyped here because
    # recovery.py itself sees the loop through this module
    recovery: Any = None


class Loop(Protocol):
    """The running fixpoint of one recursive group, as strategies see it."""

    ctx: Context
    group: GroupStep
    states: dict[str, RelationState]
    stats: list[IterationStats]
    spark_limits: SparkLimits

    def branch_df(self, cte: CTEPlan, branch: Branch, refs: dict[str, DataFrame],
                  broadcast_bases: bool = False,
                  bases: dict[str, DataFrame] | None = None) -> DataFrame: ...

    def base(self, cte: CTEPlan, table: str, columns: tuple[str, ...]) -> DataFrame: ...

    def shape(self, cte: CTEPlan, branch: Branch, df: DataFrame) -> DataFrame: ...

    def bind_variant(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]) -> Any: ...

    def doubling_round(self, iteration: int) -> bool: ...

    def materialize(self, cte: CTEPlan, merged: DataFrame, iteration: int) -> DataFrame: ...

    def fail_iteration_limit(self, iteration: int, deltas: dict[str, int] | None = None) -> None: ...


class Runner(Protocol):
    """One way to run a fixpoint's next iteration(s); `fixpoint.GroupRun.runners` lists them in
    the order they are asked."""

    def run(self, iteration: int) -> int | None:
        """Run the iteration(s) after `iteration` and return the last one completed, or decline
        with None and leave the loop untouched."""
        ...
