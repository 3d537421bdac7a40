"""Key lookup: a tiny delta reads only the base rows it joins, not the whole base table.

Late in a fixpoint a delta of a handful of rows still joins the whole pre-partitioned base, and
on a large base scanning it is most of such an iteration (RMAT 2^20, CC: 33M edges, about 0.9 s
of a 1.0 s iteration). The base copy is sorted by its join columns within each partition
(`fixpoint.GroupRun.materialize_base`), so Spark's columnar cache holds each batch's least and
greatest join key; when the delta has at most `MAX_KEYS` rows, its join keys are collected and
the base is filtered by them, and the scan skips every batch whose range holds none of them
(CC at 2^20: such an iteration 1.0 s -> 0.45 s).

Collecting the keys is one more small job (about 0.08 s on local[2]), which a scan of a small
base does not cost: the lookup runs only where the base holds at least
`lookup.minPartitionRows` rows in a partition (forced on at RMAT 2^16, 240k-460k rows a
partition, SSSP was 7% slower and CC 8% faster; at 2^20, 4M-8M, SSSP 8% and CC 10% faster).

Only an inner equi-join may be filtered so (a base row with another key joins no delta row), and
only where a key compares as a literal the way the join compares it: the same type on both
sides, with no cast, collation or floating-point rounding between them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from recsql.executor.action import spark_job
from recsql.executor.loop import Loop
from recsql.planner.model import DELTA, Branch, CTEPlan

# `col IN (...)` is compared element by element on every row of the batches it keeps, so the
# keys stay few (253 keys were slower than the full scan at RMAT 2^20)
MAX_KEYS = 32
# Spark prunes cached batches for an IN list but not for the hash set its optimizer makes of a
# list longer than spark.sql.optimizer.inSetConversionThreshold (10 by default): lists this long
# ORed together are pruned like one list
_IN_LIST = 10


def bases(run: Loop, cte: CTEPlan, branch: Branch, variant: tuple[str, ...],
          iteration: int) -> dict[str, DataFrame] | None:
    """The branch's large base tables filtered to the join keys of the rule's (first) delta, by
    binding, when that delta has at most `MAX_KEYS` rows; None when none is filtered."""
    if not branch.splittable or DELTA not in variant:
        return None
    ref = branch.refs[variant.index(DELTA)]
    state = run.states[ref.cte]
    if not 0 < state.delta_rows <= MAX_KEYS:
        return None
    found = {}
    for base in branch.bases:
        join = base.join_of(ref.binding)
        if join is None:
            continue
        run.base(cte, base.table, base.columns)  # made (or found kept) if the branch has not run yet
        known = run.ctx.bases[base.key]
        if max(known.partition_rows or [0]) < run.ctx.settings.lookup_min_partition_rows:
            continue
        if not all(_exact(state.schema[r].dataType, _field(known.df.schema, b).dataType)
                   for r, b in zip(join.columns, base.columns)):
            continue
        with spark_job(cte, iteration):
            rows = {tuple(row) for row in state.delta.select(*join.columns).collect()}
        keys = [key for key in rows if None not in key]  # a null key joins nothing
        found[base.binding] = known.df.filter(key_filter(base.columns, keys))
    return found or None


def key_filter(columns: tuple[str, ...], keys: Iterable[tuple]) -> Column:
    """True on the rows whose `columns` equal one of `keys` (tuples), in a form Spark prunes
    cached batches with (skew.py filters by it too)."""
    keys = list(keys)
    if not keys:
        return F.lit(False)
    if len(columns) == 1:
        values = [key[0] for key in keys]
        lists = [F.col(columns[0]).isin(values[i:i + _IN_LIST]) for i in range(0, len(values), _IN_LIST)]
        return reduce(lambda a, b: a | b, lists)
    matches = [reduce(lambda a, b: a & b, [F.col(c) == F.lit(v) for c, v in zip(columns, key)])
               for key in keys]
    return reduce(lambda a, b: a | b, matches)


def _field(schema: StructType, name: str):
    """The field `name` names in SQL (case-insensitively)."""
    return next(f for f in schema.fields if f.name.lower() == name.lower())


def _exact(delta: DataType, base: DataType) -> bool:
    """Whether keys of these types compare as literals the way the join compares them."""
    if isinstance(delta, StringType):
        return delta == base == StringType()  # a collation compares by its own rules
    return delta == base and isinstance(delta, (ByteType, ShortType, IntegerType, LongType, DateType))
