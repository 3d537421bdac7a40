"""What one iteration reports (to `Result.stats`, the CLI's progress line, the server's log).
A leaf: every path that runs an iteration (the Spark loop, roll-over, the driver endgame)
builds these, and none of them needs the loop to do so."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IterationStats:
    cte: str
    iteration: int  # 0 is the base (exit) step
    delta_rows: int
    total_rows: int
    seconds: float
    join_strategy: str  # "broadcast" (the delta is broadcast), "shuffle", or "-" (base step)
    ran_on: str = "spark"
    # where `seconds` went: before the action (building the branches' DataFrames, SQL analysis)
    # and the action (building the merge, Spark's planning and its one job, reading the metrics)
    driver_seconds: float = 0.0
    job_seconds: float = 0.0
    lookup: bool = False  # a tiny delta read only the base rows it joins (lookup.py)
    index: bool = False  # a small delta read only the base rows it joins (index.py)
    split_keys: int = 0  # heavy join keys split over all partitions (skew.py)
    balance: float | None = None  # largest task's join output / rows per partition (1.0 even)
    slices: int = 1  # > 1: the iteration rolled over in this many slices (see rollover)
    # rows of the largest single join output (candidates); None with roll-over off or on Connect
    output_rows: int | None = None
    # the driver endgame's first iteration: its seconds include pulling the relations and the
    # states from Spark into DuckDB, this long
    pull_seconds: float = 0.0
    # the driver endgame's last iteration: putting its states back on Spark (after its
    # `seconds`, not within them)
    write_seconds: float = 0.0
    # a Spark iteration: its driver_seconds include finding or making the pre-partitioned base
    # copies it joins (the identity check, and a cold statement's repartition and cache), this long
    base_seconds: float = 0.0
