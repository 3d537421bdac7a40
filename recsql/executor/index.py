"""Adjacency index: a delta that holds a small share of the base's join keys reads only the base
rows it joins, as GraphX's indexed edge partitions do, not only a delta of `lookup.MAX_KEYS`.

The index is the partitioned base copy grouped by its join columns, one row per key with the
key's other columns in a list (`ROWS`), cached in Spark beside the copy and kept with it across
statements (`PartitionedBase.index`). An iteration whose delta holds at most `SHARE` of the
index's keys binds the branch's base to the index semi-joined with the delta's join keys and
unnested: every base row whose key the delta holds, and no other. The branch's own join then
runs as written. Both joins are co-partitioned (the index keeps the copy's partitioning by its
join columns, which the unnested rows keep too), so nothing is shuffled.

Measured on the join side of one iteration (join, partial aggregate, shuffle write; Spark's task
CPU time, medians of 3 runs, RMAT 2^18, 3.9M edges, local[2]): a delta of 127 keys (0.1% of
the vertices) 0.37 -> 0.14 s, of 14,838 (10%) 0.66 -> 0.41 s, of 119,073 (80%) 1.64 -> 1.88 s:
above about half the keys the second join costs more than the scan saves, hence `SHARE`.

Only an inner equi-join whose key compares as a literal would (lookup's conditions: the same
types on both sides) may be bound so; a semi-join keeps NULL keys out as the equi-join does.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsql.executor.action import aggregate, spark_job
from recsql.executor.lookup import field_named
from recsql.executor.loop import Loop, PartitionedBase
from recsql.executor.state import RelationState
from recsql.planner.model import DELTA, Branch, CTEPlan

ROWS = "__rq_rows"
SHARE = 0.25  # a delta of at most this share of the index's keys reads the index


class Index:
    """Binds a branch's base tables to the rows the rule's delta joins (see the module); rides on
    the action (a `loop.Rider`) only to report which iterations read the index."""

    def __init__(self, run: Loop) -> None:
        self.run = run
        self.used: set[str] = set()  # the CTEs whose candidates of this iteration read an index

    def watch(self, cte: CTEPlan, candidates: DataFrame, iteration: int) -> DataFrame:
        return candidates

    def metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        return []

    def observed(self, cte: CTEPlan, metrics: dict, reported: bool) -> None:
        pass

    def report(self, cte: CTEPlan) -> dict:
        used = cte.key in self.used
        self.used.discard(cte.key)
        return {"index": used}

    def bases(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]) -> dict[str, DataFrame] | None:
        """The branch's base tables restricted to the keys of the rule's (first) delta, by
        binding, when the index is on and the delta is small enough; None otherwise."""
        if not self.run.ctx.settings.index_enabled or not branch.splittable or DELTA not in variant:
            return None
        ref = branch.refs[variant.index(DELTA)]
        state = self.run.states[ref.cte]
        found = {}
        for base in branch.bases:
            join = base.join_of(ref.binding)
            if join is None:
                continue
            self.run.base(cte, base.table, base.columns)  # made (or found kept) if not yet
            copy = self.run.ctx.bases[base.key]
            if not all(field_named(state.schema, r).dataType == field_named(copy.df.schema, b).dataType
                       for r, b in zip(join.columns, base.columns)):
                continue  # the join casts one side: equality on the key is not the join's
            index, keys = self.index(cte, copy, base.columns)
            if state.delta_rows > SHARE * keys:
                continue
            delta = state.delta.select(*[F.col(r).alias(b) for r, b in zip(join.columns, base.columns)])
            on = [index[b] == delta[b] for b in base.columns]
            hit = index.join(delta.hint("shuffle_hash"), reduce(lambda a, b: a & b, on), "left_semi")
            rows = hit.select(*base.columns, F.inline(ROWS))
            found[base.binding] = rows.select(*copy.df.columns)
        if found:
            self.used.add(cte.key)
        return found or None

    def index(self, cte: CTEPlan, copy: PartitionedBase, columns: tuple[str, ...]) -> tuple[DataFrame, int]:
        """The copy's index and its number of keys, built (one job) the first time it is asked for."""
        if copy.index is None:
            others = [c for c in copy.df.columns if c not in columns]
            grouped = copy.df.groupBy(*columns).agg(F.collect_list(F.struct(*others)).alias(ROWS))
            index = grouped.persist()
            with spark_job(cte, self.run.building):
                copy.index_keys = aggregate(index, [F.count(F.lit(1)).alias("keys")])["keys"]
            copy.index = index
        return copy.index, copy.index_keys or 0
