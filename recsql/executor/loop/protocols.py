"""What the strategies (roll-over, recovery, the endgame, the balancer) see of a running
fixpoint: the statement's `Context` and the `Loop` protocol that `fixpoint.GroupRun`
implements. A leaf below them all, so no strategy imports the loop back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame, SparkSession

from recsql.executor.loop.failures import BlocksLost
from recsql.executor.loop.limits import SparkLimits
from recsql.executor.loop.stats import IterationStats
from recsql.executor.state.relations import RelationState
from recsql.planner.model import BaseKey, Branch, CTEPlan, GroupStep
from recsql.planner.names import TableName
from recsql.settings import Settings


@dataclass
class PartitionedBase:
    """A base table hash-partitioned by its join columns and cached (`bases.partitioned`),
    with what the one job that filled the cache counted."""

    df: DataFrame
    partition_rows: list[int] | None = None  # counted by the job that fills the cache
    top_keys: dict[tuple, int] = field(default_factory=dict)  # its most frequent join keys (skew on)
    # grouped by its join columns (index.py): then `df` is this index unnested, or built from
    # `df` when first read where the copy was made with the index off
    index: DataFrame | None = None
    # (column, key column) -> whether every value of the column is a key (`keybound.contained`)
    contained: dict[tuple[str, str], bool] = field(default_factory=dict)
    # its rows' identity (`bases.row_identity`), where the job that filled it was asked to count it
    identity: list[tuple[Any, ...]] | None = None

    @property
    def rows(self) -> int | None:
        return None if self.partition_rows is None else sum(self.partition_rows)


@dataclass
class Context:
    """What a fixpoint needs from the statement being run."""

    spark: SparkSession
    settings: Settings
    partitions: int
    args: dict | None
    sql: str  # the user's statement, for error messages
    env: dict[str, DataFrame]  # bindings of completed CTEs and keyword DataFrames
    bases: dict[BaseKey, PartitionedBase]  # by `BaseRelation.key`
    on_iteration: Callable[[IterationStats], None] | None = None
    # makes each group run's safeguard (`strategies/recovery.Recovery.guard` where the
    # statement keeps checkpoints)
    guard: Callable[[Loop], Safeguard] = lambda group_run: Unguarded()
    # table -> what identifies its rows this statement (bases.py), computed once
    identities: dict[TableName, Any] = field(default_factory=dict)
    # table -> its `spark.table` DataFrame (bases.table_df), made once
    tables: dict[TableName, DataFrame] = field(default_factory=dict)
    scope: tuple[str, str] | None = None  # the current catalog and schema (bases.py), read once
    # kept copy slot -> the copy, found current (or made) this statement (bases.py), checked once
    current: dict[tuple, Any] = field(default_factory=dict)
    # the partial aggregates' fast hash map as last sized for an iteration (action.py), or None
    # where the session sets it itself
    aggregate_map_bits: int | None = None


class Loop(Protocol):
    """The running fixpoint of one recursive group, as strategies see it."""

    ctx: Context
    group: GroupStep
    states: dict[str, RelationState]
    stats: list[IterationStats]
    spark_limits: SparkLimits
    building: int  # the iteration being built
    from_base: bool  # the states came from this run's own base step (not resumed nor seeded)

    def branch_df(self, cte: CTEPlan, branch: Branch, refs: dict[str, DataFrame],
                  broadcast_bases: bool = False,
                  bases: dict[str, DataFrame] | None = None) -> DataFrame: ...

    def text(self, cte: CTEPlan, branch: Branch) -> str: ...

    def query(self, cte: CTEPlan, branch: Branch) -> Any: ...

    def base(self, cte: CTEPlan, table: TableName, columns: tuple[str, ...]) -> DataFrame: ...

    def shape(self, cte: CTEPlan, branch: Branch, df: DataFrame) -> DataFrame: ...

    def bind_variant(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]) -> Any: ...

    def doubling_round(self, iteration: int) -> bool: ...

    def vote_uses_sizes(self, cte: CTEPlan) -> bool: ...

    def materialize(self, cte: CTEPlan, merged: DataFrame, iteration: int) -> DataFrame: ...

    def fail_iteration_limit(self, iteration: int, deltas: dict[str, int] | None = None) -> None: ...


class Rider(Protocol):
    """What rides on a whole iteration's one action (`action.checkpoint_merge`), for each CTE:
    it may observe the candidates, add metrics to the merged state's observation, read them
    back, and add fields to the iteration's statistics. `fixpoint.GroupRun.riders` lists them."""

    def watch(self, cte: CTEPlan, candidates: DataFrame, iteration: int) -> DataFrame:
        """The candidates, possibly observed (the observation then reports with the action)."""
        ...

    def metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        """Aggregates over the merged state (its rows carry `state.delta_flag()`), observed in the
        action, or recomputed from the checkpointed rows where Spark reports no observation."""
        ...

    def observed(self, cte: CTEPlan, metrics: dict, reported: bool) -> None:
        """The action's metrics; `reported` is False where Spark reported no observation (then
        only `metrics` columns are known, not what `watch` observed)."""
        ...

    def report(self, cte: CTEPlan) -> dict[str, Any]:
        """`IterationStats` fields for the iteration just run."""
        ...


class Safeguard(Protocol):
    """What keeps a fixpoint's work through a failure. `fixpoint.GroupRun.run` asks it at three
    points: before the first iteration, after each completed one, and when an iteration lost
    checkpointed blocks with an executor (`Context.guard` makes one per group run)."""

    def resume(self) -> int | None:
        """Bring the states back to saved work before the loop starts: its iteration, or None
        (then the loop starts from the base step)."""
        ...

    def kept(self, iteration: int) -> None:
        """`iteration` completed: keep it where it is one to keep (this can lose blocks too)."""
        ...

    def recover(self, error: BlocksLost) -> int:
        """Bring the states back after `error`: the iteration they are at; or raise `error`."""
        ...


class Unguarded:
    """The safeguard of a statement that keeps no checkpoints: nothing to resume or keep, and
    lost blocks end the statement."""

    def resume(self) -> int | None:
        return None

    def kept(self, iteration: int) -> None:
        pass

    def recover(self, error: BlocksLost) -> int:
        raise error


class IterationRunner(Protocol):
    """One way to run a fixpoint's next iteration(s); `fixpoint.GroupRun.runners` lists them in
    the order they are asked."""

    def run(self, iteration: int) -> int | None:
        """Run the iteration(s) after `iteration` and return the last one completed, or decline
        with None and leave the loop untouched."""
        ...
