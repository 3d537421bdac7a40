"""Key lookup: a tiny delta reads only the base rows it joins, not the whole base table.

Late in a fixpoint a delta of a handful of rows still joins the whole pre-partitioned base, and
on a large base scanning it is most of such an iteration (RMAT 2^20, CC: 33M edges, about 0.9 s
of a 1.0 s iteration). The base copy is sorted by its join columns within each partition
(`fixpoint.GroupRun.materialize_base`), so Spark's columnar cache holds each batch's least and
greatest join key. The action that makes a delta also observes its join keys (`Lookup.metrics`),
which arrive when it has at most `MAX_KEYS` rows; the next iteration filters the base by them,
and its scan skips every batch whose range holds none of them. Measured on local[2], the Spark
loop, per-iteration medians of 4 interleaved runs: CC at RMAT 2^20, the two iterations reading
1 and 2 rows, 0.90 s -> 0.30 s each. With no job of its own it runs on every base: at 2^16,
where it saves little, whole runs measured 0.95x (CC) and 0.99x-1.07x (SSSP, within the noise
of 7- and 9-run medians), so one rule serves both sizes.

With the adjacency index on (the default), a branch it runs in its direct form reads the index
instead, at every delta size (index.py), filtered by the same observed keys; the lookup filters
the base tables of the branches the index does not run.

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

from recsql.executor.loop.protocols import Loop
from recsql.executor.state.relations import RelationState
from recsql.planner.model import DELTA, Branch, CTEPlan
from recsql.planner.names import quote

# `col IN (...)` is compared element by element on every row of the batches it keeps, so the
# keys stay few (253 keys were slower than the full scan at RMAT 2^20)
MAX_KEYS = 32
# Spark prunes cached batches for an IN list but not for the hash set its optimizer makes of a
# list longer than spark.sql.optimizer.inSetConversionThreshold (10 by default): lists this long
# ORed together are pruned like one list
_IN_LIST = 10
SKETCH_ITEMS = 4096  # approx_top_k's maxItemsTracked


class Lookup:
    """Rides on every whole iteration's action (a `loop.Rider`): the action also observes the
    next delta's join keys, which arrive when it has at most `MAX_KEYS` rows, so the next
    iteration's lookup needs no job of its own; `bases` then filters the base tables by them."""

    def __init__(self, run: Loop) -> None:
        self.run = run
        # cte -> the columns by which a plain inner equi-join with a base table reads its delta
        self.columns: dict[str, list[str]] = {}
        for reader in run.group.ctes:
            for branch in [*reader.recursive_branches, *([reader.doubling] if reader.doubling else [])]:
                joins = [(ref, join) for ref in branch.refs for base in branch.bases
                         if branch.splittable and (join := base.join_of(ref.binding)) is not None]
                for ref, join in joins:
                    watched = self.columns.setdefault(ref.cte, [])
                    watched += [c for c in join.columns if c not in watched]
        self.metric_columns: dict[str, list[Column]] = {}
        # cte -> (the delta the keys were observed for, its distinct non-null values by column)
        self.keys: dict[str, tuple[DataFrame, dict[str, list]]] = {}
        self.used: set[str] = set()  # the CTEs whose candidates of this iteration used a lookup

    # -- riding on the action --------------------------------------------------------------

    def watch(self, cte: CTEPlan, candidates: DataFrame, iteration: int) -> DataFrame:
        return candidates

    def metrics(self, cte: CTEPlan, state: RelationState) -> list[Column]:
        """Per watched column of a type a lookup can compare, the next delta's values, or null
        when it has more than `MAX_KEYS` rows. A bounded sketch (`approx_top_k`, exact for so few
        values) rather than a set, which would grow with a large delta (a set cost 0.9 s on a
        2M-row state, the sketch nothing measurable). Built once per CTE: each Column node is a
        Py4J round trip."""
        if not self.run.ctx.settings.lookup_enabled:
            return []
        if cte.key not in self.metric_columns:
            flag = state.delta_flag()
            few = F.count_if(flag) <= MAX_KEYS
            self.metric_columns[cte.key] = [
                # one more than MAX_KEYS: the rows outside the delta count as one null value
                F.when(few, top_k(F.when(flag, F.col(c)), MAX_KEYS + 1)).alias(f"lookup_keys_{c}")
                for c in self.columns.get(cte.key, []) if _comparable(field_named(state.schema, c).dataType)]
        return self.metric_columns[cte.key]

    def observed(self, cte: CTEPlan, metrics: dict, reported: bool) -> None:
        found = {}
        for c in self.columns.get(cte.key, []):
            items = metrics.get(f"lookup_keys_{c}")
            if items is not None:  # a null value joins nothing
                found[c] = [row["item"] for row in items if row["item"] is not None]
        # tied to the delta just committed: a delta made any other way (roll-over's slices, a
        # restored checkpoint) is another DataFrame, and finds no keys
        self.keys[cte.key] = (self.run.states[cte.key].delta, found)

    def report(self, cte: CTEPlan) -> dict:
        used = cte.key in self.used
        self.used.discard(cte.key)
        return {"lookup": used}

    # -- the lookup --------------------------------------------------------------------------

    def delta_keys(self, cte_key: str) -> dict[str, list] | None:
        """The distinct non-null values, by watched column, of the current delta of the CTE
        `cte_key`, when the action that made it observed them (it had at most `MAX_KEYS` rows);
        None otherwise. Also read by the adjacency index's direct form (index.py)."""
        delta, values = self.keys.get(cte_key, (None, {}))
        return values if delta is self.run.states[cte_key].delta else None

    def bases(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]) -> dict[str, DataFrame] | None:
        """The branch's base tables filtered to the join keys of the rule's (first) delta, by
        binding, when the last action observed them; None when none is filtered.

        A base row is kept when each of its join columns holds a value the delta holds in that
        column: all the rows that can join, perhaps a few more, which the join itself drops."""
        if not branch.splittable or DELTA not in variant:
            return None
        ref = branch.refs[variant.index(DELTA)]
        state = self.run.states[ref.cte]
        values = self.delta_keys(ref.cte)
        if values is None:
            return None
        found = {}
        for base in branch.bases:
            join = base.join_of(ref.binding)
            if join is None or not all(c in values for c in join.columns):
                continue
            table = self.run.base(cte, base.table, base.columns)  # made (or found kept) if not yet
            if not all(field_named(state.schema, r).dataType == field_named(table.schema, b).dataType
                       for r, b in zip(join.columns, base.columns)):
                continue  # the join casts one side: a literal would not compare as it does
            found[base.binding] = table.filter(delta_keys_filter(values, join.columns, base.columns))
        if found:
            self.used.add(cte.key)
        return found or None


def top_k(column: Column, k: int) -> Column:
    """approx_top_k of `column`: its `k` most frequent values with their counts, exact while it
    holds fewer than `SKETCH_ITEMS` distinct values (skew.py watches heavy keys with it too)."""
    return F.call_function("approx_top_k", column, F.lit(k), F.lit(max(k, SKETCH_ITEMS)))


def delta_keys_filter(values: dict[str, list], delta_columns: Iterable[str],
                      base_columns: Iterable[str]) -> Column:
    """True on the base rows each of whose join columns holds a value the delta holds in the
    column it is joined with (`values`, by the delta's column, as `Lookup.delta_keys` gives
    them); every delta column must have its values."""
    kept = [key_filter((b,), [(v,) for v in values[r]]) for r, b in zip(delta_columns, base_columns)]
    return reduce(lambda a, b: a & b, kept)


def key_filter(columns: tuple[str, ...], keys: Iterable[tuple]) -> Column:
    """True on the rows whose key equals one of `keys` (1-tuples), in a form Spark prunes cached
    batches with (skew.py filters by it too). Keys are of one column: the lookup filters column by
    column, and skew finds heavy keys of one column only (`skew.sketchable`)."""
    keys = list(keys)
    if not keys:
        return F.lit(False)
    (column,) = columns
    values = [key[0] for key in keys]
    chunks = [values[i:i + _IN_LIST] for i in range(0, len(values), _IN_LIST)]
    if all(type(v) is int for v in values):
        # as SQL text, where integers print as the literals `F.lit` makes of them (INT, BIGINT
        # past its range): a Column costs a Py4J round trip per node and literal (19 for a
        # 1-key isin, against 3 for the text), a tiny iteration filters by a delta's keys
        lists = [f"{quote(column)} IN ({', '.join(map(str, chunk))})" for chunk in chunks]
        return F.expr(" OR ".join(lists))
    return reduce(lambda a, b: a | b, [F.col(column).isin(chunk) for chunk in chunks])


def field_named(schema: StructType, name: str):
    """The field `name` names in SQL (case-insensitively)."""
    return next(f for f in schema.fields if f.name.lower() == name.lower())


def _comparable(data_type: DataType) -> bool:
    """Whether values of this type compare as literals the way an equi-join compares them: no
    collation (a collated string compares by its own rules) and no floating-point rounding."""
    if isinstance(data_type, StringType):
        return data_type == StringType()
    return isinstance(data_type, (ByteType, ShortType, IntegerType, LongType, DateType))
