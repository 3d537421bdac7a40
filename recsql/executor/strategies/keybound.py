"""Dropping the candidates that cannot change a min()/max() CTE before their partial aggregate
(`planner/keybound.py`): CC's candidate `(Dst, C)` with `C >= Dst`, when every `Dst` of the
edge table is also a `Src` (then `Dst`'s group holds at most `Dst` from the base step on).

The candidates' partial aggregate is most of a wide iteration's CPU (CC's first iterations join
every vertex with its edges): dropping them in the same pipeline, a comparison of two columns
of the row, costs no probe of the state (the message filter that probed it cost as much as it
saved, benchmarks/FINDINGS.md).

Only in the first iteration after the run's own base step (`GroupRun.from_base`; a state
resumed or seeded from elsewhere need not hold every base group). There every label is its key,
so half of CC's candidates go; later, when labels have fallen below their keys, few go (the
second iteration's shuffled rows fell by 0.1% at RMAT 2^20), and comparing every candidate did
not pay there.

Whether every `Dst` is a `Src` is learnt, not checked: a statement whose first iteration ran
without the filter, through a branch that makes a candidate for every row of the copy
(`KeyBound.witnesses`), has every `Src` as a group after its base step and every `Dst` among
that iteration's candidates' groups; the iteration added no group exactly when every `Dst` is a
`Src`. Two counts the iteration's action takes anyway. The fact is kept with the copy (a changed
table makes a new copy, which knows nothing), so that a later statement over the kept copy
filters. A check of its own (an anti-join of the column's distinct values with the keys) cost a
cold statement more than the filter saved (benchmarks/FINDINGS.md, "the key bound").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from recsql.executor.loop.protocols import Loop, PartitionedBase
from recsql.executor.strategies.lookup import field_named
from recsql.planner.model import Branch, CTEPlan, KeyBound


def drop_unchanging(run: Loop, cte: CTEPlan, branch: Branch, candidates: DataFrame) -> DataFrame:
    """`candidates` (shaped as `cte`'s head) without the rows that cannot change its state, where
    the key bound holds (see the module); else `candidates` as they are."""
    bound = cte.key_bound
    if bound is None or not run.from_base or run.building != 1:
        return candidates
    source = bound.source(branch)
    copy = run.ctx.bases.get(bound.base)
    if source is None or copy is None or not _one_type(run, cte, bound, copy, source):
        return candidates
    if copy.contained.get((source.lower(), bound.column.lower())) is not True:
        return candidates
    key, value = cte.group_key[0], cte.aggregates[0].name
    return candidates.filter(may_change(bound, F.col(key), F.col(value)))


def may_change(bound: KeyBound, key: Column, value: Column) -> Column:
    """False where a candidate's value is not below its key (min) or above it (max); a NULL on
    either side is kept (the comparison says nothing)."""
    unchanging = value >= key if bound.extremum == "min" else value <= key
    return ~F.coalesce(unchanging, F.lit(False))


def learn(run: Loop, cte: CTEPlan, groups_before: int, groups_after: int) -> None:
    """After the first iteration that followed the run's own base step: whether every value of
    each witness branch's key column is a key of the copy, from the state's groups before and
    after it (see the module), kept with the copy where it is not known yet."""
    bound = cte.key_bound
    if bound is None or not bound.witnesses or not run.from_base or run.building != 1:
        return
    copy = run.ctx.bases.get(bound.base)
    if copy is None:
        return
    for branch in cte.recursive_branches:
        source = bound.source(branch)
        if branch.index in bound.witnesses and source is not None and \
                _one_type(run, cte, bound, copy, source):
            copy.contained.setdefault((source.lower(), bound.column.lower()), groups_after == groups_before)


def _one_type(run: Loop, cte: CTEPlan, bound: KeyBound, copy: PartitionedBase, source: str) -> bool:
    """Whether the group key, the value and both columns of the copy have one type: the join,
    the groups and the filter's comparison then see the copy's values as they are (no cast)."""
    schema = run.states[cte.key].schema
    key, value = cte.group_key[0], cte.aggregates[0].name
    types = {schema[key].dataType, schema[value].dataType,
             field_named(copy.df.schema, bound.column).dataType, field_named(copy.df.schema, source).dataType}
    return len(types) == 1
