"""The one Spark action of an iteration, shared by every path that runs one (a whole iteration in
`fixpoint.py`, each slice in `rollover.py`): observe the merged state's sizes and whatever the
strategies watch, `localCheckpoint` it (which cuts the lineage, so iteration N plans as fast as
iteration 1), count the checkpointed rows where Spark Connect reports no observation, and commit
the result to the state through its own method."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Observation

from recsql.executor.loop import failures
from recsql.executor.loop.protocols import Context, Loop
from recsql.executor.state.relations import PARTITION, RelationState, with_partition
from recsql.planner.model import CTEPlan

_names = count()


def checkpoint_merge(run: Loop, cte: CTEPlan, state: RelationState, merged: DataFrame, iteration: int,
                     watched: list[Column], by_partition: bool) -> tuple[dict, bool]:
    """Run the action on `merged` (the state's merge of the candidates) and commit it; the
    observed metrics (the state's, its delta's rows per partition if `by_partition`, and
    `watched`), and whether Spark reported the observation (where it did not, the metrics are
    recomputed from the checkpointed rows, and observations of the candidates are lost)."""
    observation = Observation(f"recsql_{cte.key}_{iteration}_{next(_names)}")
    if by_partition:
        metrics = [*state.totals, *state.partition_sizes, *watched]
        observed = with_partition(merged).observe(observation, *metrics).drop(PARTITION)
    else:
        metrics = [*state.totals, *watched]
        observed = merged.observe(observation, *metrics)
    size_aggregate_map(run.ctx, state.total_rows)
    checkpointed = run.materialize(cte, observed, iteration)
    found = observation.get
    reported = "delta_rows" in found
    if not reported:  # Spark Connect does not report observations of a checkpoint
        found = aggregate(with_partition(checkpointed) if by_partition else checkpointed, metrics)
    state.commit(checkpointed, found)
    return found, reported


# The capacity (log2) of the fast hash map that a task's partial aggregate fills before its
# general one. Spark's 16 (65,536 groups, two probes) is passed by an iteration that joins a delta
# of most vertices with their edges (CC's first iterations, SSSP's widest), whose millions of
# candidates fall into a group per destination, 174,000 at RMAT 2^18 and 546,000 at 2^20: most
# then went to the slower general map, four fifths of the join side's CPU. A map twice the
# relation's rows holds them; each task allocates its buckets (8 MiB at 2^20), which cost small
# statements 3-8% of their task CPU when every iteration took 2^20, so a relation of fewer than
# 2^15 rows keeps Spark's size. The map's 64 MiB page holds about 1.6M groups anyway.
# Measured: benchmarks/FINDINGS.md (`aggmap`).
AGGREGATE_MAP_BITS = "spark.sql.codegen.aggregate.fastHashMap.capacityBit"
SPARK_MAP_BITS, MAX_MAP_BITS = 16, 20


def aggregate_map_bits(rows: int) -> int:
    """The fast hash map's capacity (log2) for an iteration over a relation of `rows` rows (its
    state before the iteration: the groups its candidates may reach, the new ones aside).

    >>> [aggregate_map_bits(n) for n in (0, 32_768, 32_769, 174_005, 546_700, 4_000_000)]
    [16, 16, 17, 19, 20, 20]
    """
    return min(MAX_MAP_BITS, max(SPARK_MAP_BITS, (2 * rows - 1).bit_length()))


def size_aggregate_map(ctx: Context, rows: int) -> None:
    """Size the fast hash map of the next action's partial aggregates for a relation of `rows`
    rows, unless the session sets it (read when the action plans; set only when it changes)."""
    if ctx.aggregate_map_bits is None:
        return
    bits = aggregate_map_bits(rows)
    if bits != ctx.aggregate_map_bits:
        ctx.spark.conf.set(AGGREGATE_MAP_BITS, str(bits))
        ctx.aggregate_map_bits = bits


def aggregate(df: DataFrame, columns: list[Column]) -> dict:
    """An ungrouped aggregate of `df`: its one row, as a dict."""
    row = df.agg(*columns).first()
    if row is None:  # never: an aggregate without GROUP BY has exactly one row
        raise AssertionError("an ungrouped aggregate returned no row")
    return row.asDict()


@contextmanager
def spark_job(cte: CTEPlan, iteration: int) -> Iterator[None]:
    """Spark's failure of a job run for `cte` at `iteration` (a checkpoint, a pull to the driver)
    as a recsql error that names both and keeps Spark's condition; blocks lost with an executor
    as `failures.BlocksLost`, which the loop's safeguard may recover from."""
    try:
        yield
    except Py4JJavaError as error:
        # A failed job pyspark does not classify (e.g. FAILED_READ_FILE on malformed data)
        failure = failures.from_trace(cte.name, iteration, str(error))
        if failures.lost_blocks(str(error)):
            raise failures.BlocksLost(failure.message, condition=failure.condition) from None
        raise failure from None
    except PySparkException as error:
        if failures.lost_blocks(str(error)):
            raise failures.BlocksLost(f"CTE `{cte.name}` failed at iteration {iteration}: "
                                      f"{error}", condition="RECSQL_BLOCKS_LOST") from None
        raise failures.from_exception(cte.name, iteration, error) from None
