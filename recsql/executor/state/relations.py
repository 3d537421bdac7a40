"""The state of one recursive relation across iterations, one class per head semantics.

Every class keeps `all` hash-partitioned by the group key, so merging an iteration's candidates
is one shuffle of the candidates followed by one partition-local pass that both aggregates and
finds what changed (aggregation fused with deduplication, PARALAGG IV-A). `merge` returns that
pass as one DataFrame carrying `__changed` (and the metrics the loop observes); after the loop
checkpoints it, `commit` derives `all` and `delta` from it without further jobs.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, TypedDict

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, DoubleType, FloatType, StructField, StructType
from sqlglot import exp

from recsql.executor.analysis.spark_types import empty
from recsql.planner import aggregates
from recsql.planner.aggregates import Kind
from recsql.planner.model import CTEPlan, HeadColumn

CHANGED, OLD, REP, CONTRIB = "__rq_changed", "__rq_old", "__rq_rep", "__rq_contrib"
PARTITION = "__rq_partition"
BEST = "__rq_best_"  # the column prefix of a ranked tuple (`aggregates.ranked`)


def with_partition(df: DataFrame) -> DataFrame:
    """`df` with the id of the partition each row sits in, as a column for metrics to count.

    Spark Connect's analyzer refuses a non-deterministic expression such as
    `spark_partition_id()` inside an aggregate (`observe`, `agg`), so it is projected first;
    drop the column again after observing."""
    return df.withColumn(PARTITION, F.spark_partition_id())


def spark(expression: exp.Expr) -> Column:
    """`expression` (of `aggregates`, over the state's columns) as a Spark Column."""
    return F.expr(expression.sql("spark", identify=True))


def ranked_type(schema: StructType, column: HeadColumn, payload: list[HeadColumn]) -> StructType:
    """The type of `aggregates.ranked` over the state's `schema`."""
    return StructType([StructField(field, BooleanType(), False) if name is None else
                       StructField(field, schema[name].dataType, True)
                       for field, name in aggregates.ranked_fields(column, payload)])


class _ExtremaMerge(TypedDict):
    """`ExtremaState.merge`'s expressions: aggregates, and projections (which take names too)."""

    key: list[Column]
    new: list[Column]
    old: list[Column]
    merged: list[Column]
    order: list[str] | None


class RelationState:
    """Common part: the relation's schema, its current `all` and `delta`, and their sizes."""

    def __init__(self, spark: SparkSession, cte: CTEPlan, schema: StructType, partitions: int):
        self.spark = spark
        self.cte = cte
        self.schema = schema
        self.partitions = partitions
        self.all: DataFrame = empty(spark, schema)
        self.delta: DataFrame = self.all
        self.delta_rows = 0
        self.total_rows = 0
        self.delta_partition_rows: list[int] | None = None
        self._made_from: tuple[DataFrame, Any] | None = None  # (`all`, its rows on the driver)

    @property
    def columns(self) -> list[str]:
        return self.schema.fieldNames()

    @property
    def key(self) -> list[str]:
        return self.cte.group_key

    def delta_flag(self) -> Column:
        """True on the rows of the merged state that form the next delta."""
        return F.col(CHANGED)

    def total_flag(self) -> Column:
        """True on the rows of the merged state that are rows of the relation."""
        return F.lit(True)

    @cached_property
    def totals(self) -> list[Column]:
        """What the iteration's one action reports: new/changed rows and total rows.

        Built once per state: Columns are reusable expressions, and building them costs a Py4J
        round trip per node (about a quarter of an iteration's driver time when rebuilt each time)."""
        return [F.count_if(self.delta_flag()).alias("delta_rows"),
                F.count_if(self.total_flag()).alias("total_rows")]

    @cached_property
    def partition_sizes(self) -> list[Column]:
        """The next delta's rows in each partition, for the next iteration's join-side vote; they
        read the `PARTITION` column (see `with_partition`), which the action projects only when
        a vote can use them (it cost a tail iteration 0.05-0.16 s)."""
        return [F.count_if(self.delta_flag() & (F.col(PARTITION) == k)).alias(f"delta_p{k}")
                for k in range(self.partitions)]

    def merge(self, candidates: DataFrame) -> DataFrame:
        raise NotImplementedError

    def commit(self, merged: DataFrame, metrics: dict) -> None:
        """Take an iteration's checkpointed merge and the sizes its action observed."""
        self.all = merged.drop(CHANGED)
        # the flag as SQL text: `F.col` costs 13 Py4J round trips on classic Spark, the text one
        self.delta = merged.filter(CHANGED).drop(CHANGED)
        self._sizes(metrics)
        self.total_rows = metrics["total_rows"]

    def _sizes(self, metrics: dict) -> None:
        self.delta_rows = metrics["delta_rows"]
        measured = "delta_p0" in metrics
        self.delta_partition_rows = [metrics[f"delta_p{k}"] for k in range(self.partitions)] if measured else None

    def replace_delta(self, delta: DataFrame, metrics: dict) -> None:
        """A delta computed apart from the merge (roll-over's slices), with its observed sizes."""
        self.delta = delta
        self._sizes(metrics)

    def restore(self, all_: DataFrame, delta: DataFrame | None, delta_rows: int, total_rows: int,
                contributors: DataFrame | None = None, rows: Any = None) -> None:
        """Put back a state computed elsewhere (a reliable checkpoint, the driver endgame);
        no `delta` means an empty one; `rows`: `all_`'s rows as the Arrow table the driver
        made it from (`rows_on_driver`)."""
        self.all = all_
        self._made_from = (all_, rows) if rows is not None else None
        if delta is None:
            self.no_change()
        else:
            self.delta, self.delta_rows, self.delta_partition_rows = delta, delta_rows, None
        self.total_rows = total_rows
        if contributors is not None:
            self.contributors = contributors

    def no_change(self) -> None:
        """No candidates this iteration: the delta is empty and `all` stays as it is."""
        self.delta = empty(self.spark, self.schema)
        self.delta_rows = 0
        self.delta_partition_rows = None

    def result(self) -> DataFrame:
        return self.all

    def rows_on_driver(self) -> Any:
        """The result's rows as an Arrow table, where the driver made the result as it is now
        (a materialized view writes them without a Spark job), else None."""
        made = self._made_from
        return made[1] if made is not None and made[0] is self.result() else None

    def shuffle_by_key(self, df: DataFrame) -> DataFrame:
        return df.repartition(self.partitions, *self.key) if self.key else df.coalesce(1)


class SetState(RelationState):
    """UNION without aggregates: each distinct row once; the delta is the rows not seen before."""

    def merge(self, candidates: DataFrame) -> DataFrame:
        cols = self.columns
        # distinct() aggregates map-side, then shuffles by all columns: the state's placement.
        fresh = candidates.distinct().withColumn(OLD, F.lit(False))
        both = self.all.withColumn(OLD, F.lit(True)).unionByName(fresh)
        merged = both.groupBy(*cols).agg(F.max(OLD).alias(OLD))
        return merged.withColumn(CHANGED, ~F.col(OLD)).drop(OLD)

    @property
    def key(self) -> list[str]:
        return self.columns


class ExtremaState(RelationState):
    """min()/max() heads: a group's value is the extremum over every derivation."""

    def merge(self, candidates: DataFrame) -> DataFrame:
        plan = self.merge_columns
        new = candidates.groupBy(*plan["key"]).agg(*plan["new"])
        old = self.all.select(*plan["old"])
        merged = old.unionByName(new).groupBy(*plan["key"]).agg(*plan["merged"])
        return merged if plan["order"] is None else merged.select(*plan["order"])

    @cached_property
    def merge_columns(self) -> _ExtremaMerge:
        """The merge's expressions, built once per state (see `totals`). Each aggregation also
        computes what follows it (the new rows' flags, the changed flag), since every DataFrame
        step costs an analysis on the driver: four steps instead of six took SSSP at RMAT 2^16
        on the Spark loop 2.44 -> 2.25 s, CC 1.65 -> 1.60 s (medians of 9 interleaved runs).

        A column with payload is merged as its `ranked` tuple (in a column of its own, `BEST`
        + name); the winning tuple's fields are the column's and its payload's new values."""
        key = [F.col(k) for k in self.key]  # names cost a Column each time they are passed
        new: list[Column] = []
        old: list[Column] = list(key)
        nulls: list[Column] = []
        merged: list[Column] = []
        grouped = list(self.key)
        changed = ~F.max(OLD)
        for c in self.cte.aggregates:
            payload = self.cte.payload(c)
            agg = aggregates.aggregate(c)
            dtype: DataType
            value: exp.Expr
            if payload:
                name, value = BEST + c.name, aggregates.ranked(c, payload)
                dtype = ranked_type(self.schema, c, payload)
            else:
                name, value = c.name, exp.column(c.name, quoted=True)
                dtype = self.schema[c.name].dataType
            best = agg.folded(exp.column(name, quoted=True))
            new.append(spark(agg.folded(value)).alias(name))
            nulls.append(F.lit(None).cast(dtype).alias(OLD + name))
            old += [spark(value).alias(name), spark(value).alias(OLD + name)]
            changed = changed | spark(aggregates.changed(best, exp.Max(this=exp.column(OLD + name, quoted=True))))
            fields = aggregates.unranked(best, c, payload) if payload else {c.name: best}
            for column in [c, *payload]:
                merged.append(spark(fields[column.name]).alias(column.name))
                grouped.append(column.name)
        return {
            "key": key,
            "new": [*new, *nulls, F.lit(False).alias(OLD)],
            "old": [*old, F.lit(True).alias(OLD)],
            "merged": [*merged, changed.alias(CHANGED)],
            # an aggregation puts the group key first: the head's own order where it differs
            "order": None if grouped == self.columns else [*self.columns, CHANGED],
        }


class ContributorState(RelationState):
    """sum()/count() heads (RaSQL's monotonic sum): a group's value is the sum, over distinct
    contributors, of each contributor's latest value. The contributor table is kept
    partitioned by the group key; one window pass per iteration turns it into group totals."""

    def __init__(self, spark, cte, schema, partitions, tolerance: float):
        super().__init__(spark, cte, schema, partitions)
        self.tolerance = tolerance
        contributor_schema = StructType(
            [*[schema[k] for k in self.key], schema_field(CONTRIB),
             *[schema[c.name] for c in cte.aggregates]]
        )
        self.contributors: DataFrame = empty(spark, contributor_schema)

    def delta_flag(self) -> Column:
        return F.col(REP) & F.col(CHANGED)

    def total_flag(self) -> Column:
        return F.col(REP)

    def merge(self, candidates: DataFrame) -> DataFrame:
        aggs = self.cte.aggregates
        fresh = self.shuffle_by_key(candidates).select(
            *self.key, CONTRIB, *[c.name for c in aggs], F.lit(False).alias(OLD)
        )
        both = self.contributors.withColumn(OLD, F.lit(True)).unionByName(fresh)
        per_contributor = both.groupBy(*self.key, CONTRIB).agg(
            *[self._contributor_value(c) for c in aggs],
            *[F.max(F.when(F.col(OLD), F.col(c.name))).alias(OLD + c.name) for c in aggs],
            F.max(OLD).alias(OLD),
        )
        changed = ~F.col(OLD)
        for c in aggs:
            changed = changed | ~F.col(c.name).eqNullSafe(F.col(OLD + c.name))
        group = _window(self.key)
        totals = [self._group_value(c).over(group).alias("__rq_total_" + c.name) for c in aggs]
        return per_contributor.select(
            *self.key, CONTRIB, *[c.name for c in aggs], *totals,
            F.max(changed).over(group).alias(CHANGED),
            (F.row_number().over(group.orderBy(CONTRIB)) == 1).alias(REP),
        )

    def _contributor_value(self, column: HeadColumn) -> Column:
        """The contributor's value after this iteration (`Aggregate.contribution`), from its new
        rows' value and its old one."""
        agg = aggregates.aggregate(column)
        value = exp.column(column.name, quoted=True)
        flag = exp.column(OLD, quoted=True)
        new = agg.fresh(exp.Case(ifs=[exp.If(this=exp.Not(this=flag), true=value)]))
        old = exp.Max(this=exp.Case(ifs=[exp.If(this=flag.copy(), true=value.copy())]))
        floating = isinstance(self.schema[column.name].dataType, (DoubleType, FloatType))
        return spark(agg.contribution(new, old, self.tolerance if floating else None)).alias(column.name)

    @staticmethod
    def _group_value(column: HeadColumn) -> Column:
        return spark(aggregates.aggregate(column).total(exp.column(column.name, quoted=True)))

    def commit(self, merged: DataFrame, metrics: dict) -> None:
        aggs = self.cte.aggregates
        self.contributors = merged.select(*self.key, CONTRIB, *[c.name for c in aggs])
        groups = merged.filter(REP).select(
            *self.key, *[F.col("__rq_total_" + c.name).alias(c.name) for c in aggs], CHANGED
        )
        self.all = groups.select(*self.columns)
        self.delta = groups.filter(CHANGED).select(*self.columns)
        self._sizes(metrics)
        self.total_rows = metrics["total_rows"]


class BagState(RelationState):
    """UNION ALL: each step works on the previous step's rows; the result is every step's rows.

    Steps are kept as checkpointed parts, compacted every `COMPACT_EVERY` steps so the final
    union stays small however long the recursion runs."""

    COMPACT_EVERY = 16

    def __init__(self, spark: SparkSession, cte: CTEPlan, schema: StructType, partitions: int) -> None:
        super().__init__(spark, cte, schema, partitions)
        self.parts: list[DataFrame] = []

    def merge(self, candidates: DataFrame) -> DataFrame:
        return candidates.withColumn(CHANGED, F.lit(True))

    def commit(self, merged: DataFrame, metrics: dict) -> None:
        self.delta = merged.drop(CHANGED)
        self._sizes(metrics)
        self.total_rows += self.delta_rows
        self.parts.append(self.delta)
        whole = union_all(self.parts)
        if whole is None:  # never: the delta was just appended
            raise AssertionError("no parts after appending the delta")
        if len(self.parts) >= self.COMPACT_EVERY:
            whole = whole.localCheckpoint(eager=True)
            self.parts = [whole]
        self.all = whole

    def restore(self, all_: DataFrame, delta: DataFrame | None, delta_rows: int, total_rows: int,
                contributors: DataFrame | None = None, rows: Any = None) -> None:
        super().restore(all_, delta, delta_rows, total_rows, contributors, rows)
        self.parts = [all_]


def schema_field(name: str):
    from pyspark.sql.types import StringType, StructField

    return StructField(name, StringType(), nullable=False)


def _window(key: list[str]):
    from pyspark.sql import Window

    return Window.partitionBy(*key) if key else Window.partitionBy(F.lit(0))


def union_all(parts: list[DataFrame]) -> DataFrame | None:
    """The parts by name, one after the other; None for no parts."""
    if not parts:
        return None
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def make_state(spark: SparkSession, cte: CTEPlan, schema: StructType, partitions: int,
               tolerance: float) -> RelationState:
    """The state of `cte`'s kind (`aggregates.kind`)."""
    kind = aggregates.kind(cte)
    if kind is Kind.CONTRIBUTORS:
        return ContributorState(spark, cte, schema, partitions, tolerance)
    return STATES[kind](spark, cte, schema, partitions)


# the state of each kind but the contributors' (which also takes the tolerance)
STATES: dict[Kind, type[RelationState]] = {Kind.BAG: BagState, Kind.SET: SetState, Kind.EXTREMA: ExtremaState}
