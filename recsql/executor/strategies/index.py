"""Adjacency index: an iteration reads only the base rows its delta joins, as GraphX's indexed
edge partitions do, whatever the delta's size.

The index is the partitioned base copy grouped by its join columns, one row per key with the
key's other columns in a list (`ROWS`), sorted by key within its partitions. It is the copy
(`fixpoint.GroupRun.materialize_base`, `PartitionedBase.index`): every other strategy (the key
lookup, skew, broadcast, roll-over) reads it unnested (`unnested`), so a cold statement groups
the repartitioned table where it sorted it, and the copy is not stored twice. A branch that
joins its delta with one base table on the base's partition key, and reads nothing else, runs in
its direct form: the delta joined with the index (one row per delta row and key, not per base
row), the lists unnested, and the branch's SELECT and WHERE evaluated over that one relation
(`direct_select`). The join is co-partitioned (the index keeps the copy's partitioning by its
join columns), so nothing but the candidates is shuffled.

Measured over a later statement at RMAT 2^18 (local[2], Spark's task CPU time of the join side,
benchmarks/FINDINGS.md): SSSP 6.31 -> 4.03 s, CC 9.19 -> 6.24 s against scanning a flat copy,
lower at every iteration, from deltas of 29 keys to the hub vertices joining 1.75M of 3.9M
edges. An earlier form, the index semi-joined with the delta, unnested, then joined again as the
branch is written, lost on that hub-heavy delta and above a quarter of the keys; it is gone.

A base branch that the copy's distinct keys answer (`BaseRelation.keys_only`: CC's
`SELECT Src, Src FROM edge`) reads the index's key columns alone (`keys`), one row per key.

Only an inner equi-join whose key compares as the join compares it (the same types on both
sides) may be run so; the inner join keeps NULL keys out as the branch's equi-join does.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from recsql.executor.loop.action import aggregate, spark_job
from recsql.executor.loop.protocols import Loop, PartitionedBase
from recsql.executor.loop.spark_sql import render, run_sql
from recsql.executor.state.relations import RelationState
from recsql.executor.strategies.lookup import Lookup, delta_keys_filter, field_named
from recsql.planner.model import DELTA, BaseRelation, Branch, CTEPlan, Ref, RefJoin
from recsql.planner.names import quote

ROWS = "__rq_rows"
JOINED = "__rq_direct"  # the binding of the direct form's one relation
Direct = tuple[str, tuple[str, str]]  # the direct form's text; the delta's and the base's names in it


class Index:
    """Runs a branch in its direct form over the adjacency index (see the module); rides on the
    action (a `loop.Rider`) only to report which iterations read the index."""

    def __init__(self, run: Loop, lookup: Lookup) -> None:
        self.run = run
        self.lookup = lookup  # the keys of a tiny delta, which the index is filtered by
        self.used: set[str] = set()  # the CTEs whose candidates of this iteration read an index
        # (cte, id(branch)) -> the direct form's SQL text, or None where the branch has none
        self.texts: dict[tuple[str, int], Direct | None] = {}
        # `joined`'s join condition and projections, by the names they read (see `join_expressions`)
        self.joins: dict[tuple, tuple[Column, list[str], list[str]]] = {}

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

    def branch_df(self, cte: CTEPlan, branch: Branch, variant: tuple[str, ...]) -> DataFrame | None:
        """The branch's output for this delta rule in its direct form, or None where it has
        none (the index off, a join that is not a plain co-partitioned equi-join of the delta
        with one base table on the same types, or a branch that reads anything else)."""
        if not self.run.ctx.settings.index_enabled or not branch.copartitioned or DELTA not in variant:
            return None
        ref = branch.refs[variant.index(DELTA)]
        found = _joined_base(branch, ref)
        if found is None:
            return None
        base, join = found
        state = self.run.states[ref.cte]
        self.run.base(cte, base.table, base.columns)  # made (or found kept) if not yet
        copy = self.run.ctx.bases[base.key]
        if len(copy.df.columns) == len(base.columns):
            return None  # nothing but the key: no list to unnest
        if not all(field_named(state.schema, r).dataType == field_named(copy.df.schema, b).dataType
                   for r, b in zip(join.columns, base.columns)):
            return None  # the join casts one side: equality on the key is not the join's
        direct = self.direct(cte, branch, ref, base)
        if direct is None:
            return None
        text, aliases = direct
        joined = self.joined(cte, state, copy, base, join.columns, aliases, self.lookup.delta_keys(ref.cte))
        self.used.add(cte.key)
        return run_sql(self.run.ctx.spark, text, {JOINED: joined}, self.run.ctx.args, self.run.ctx.sql,
                       branch.select)

    def direct(self, cte: CTEPlan, branch: Branch, ref: Ref, base: BaseRelation) -> Direct | None:
        """The branch as run (contributor, shifted seeds: `GroupRun.query`) in its direct form,
        rendered once unless its seeds shift each iteration."""
        key = (cte.key, id(branch))
        if branch.seeded or key not in self.texts:
            found = direct_select(self.run.query(cte, branch), ref.binding, base.binding, JOINED)
            direct = None if found is None else (render(found[0], escape_braces=True), found[1])
            if branch.seeded:
                return direct
            self.texts[key] = direct
        return self.texts[key]

    def joined(self, cte: CTEPlan, state: RelationState, copy: PartitionedBase, base: BaseRelation,
               columns: tuple[str, ...], aliases: tuple[str, str],
               keys: dict[str, list] | None) -> DataFrame:
        """The delta joined with the index and unnested: one row per delta row and base row it
        joins, the delta's columns in a struct named as the branch names the delta, the base's
        in one named as it names the base table (`aliases`).

        Where the lookup observed a tiny delta's `keys` (by the delta's column), the index is
        first filtered by them: it is sorted by key, so the scan skips every cached batch whose
        key range holds none of them, where the join alone reads every key of the index (a
        1-row delta at RMAT 2^20 scanned all 646,074 keys, benchmarks/FINDINGS.md)."""
        index = self.index(cte, copy, base.columns)
        if keys and all(r in keys for r in columns):
            index = index.filter(delta_keys_filter(keys, columns, base.columns))
            self.lookup.used.add(cte.key)
        names = [f"__rq_d{i}" for i in range(len(state.columns))]
        key = (tuple(state.columns), columns, base.columns, aliases, tuple(copy.df.columns))
        if key not in self.joins:
            self.joins[key] = join_expressions(names, state.columns, columns, base.columns, aliases,
                                               copy.df.columns)
        on, unnest, structs = self.joins[key]
        pairs = state.delta.toDF(*names).hint("shuffle_hash").join(index, on).selectExpr(*unnest)
        return pairs.selectExpr(*structs)

    def index(self, cte: CTEPlan, copy: PartitionedBase, columns: tuple[str, ...]) -> DataFrame:
        """The copy's index; built (one job) from the copy the first time it is asked for where
        the copy was made with the index off and kept."""
        if copy.index is None:
            index = build(copy.df, columns)
            if index is None:  # never: `branch_df` reads an index only where the copy has more columns
                raise AssertionError("an index of a base table with no column besides its key")
            index = index.persist()
            with spark_job(cte, self.run.building):
                aggregate(index, [F.count(F.lit(1)).alias("keys")])
            copy.index = index
        return copy.index


def join_expressions(names: list[str], delta_columns: list[str], columns: tuple[str, ...],
                     base_columns: tuple[str, ...], aliases: tuple[str, str], copy_columns: list[str]):
    """`joined`'s join condition (the delta renamed to `names`, its `columns` equal to the
    index's `base_columns`), its unnesting projection and its two structs, as SQL text: built
    once per set of names, since each Column built in pyspark costs Py4J round trips (about 10
    each for `F.col`, `alias`, `==` on classic Spark) where an expression string costs none
    until the projection parses it. The delta's renamed columns and the index's never share a
    name, so the condition's names resolve without naming a side."""
    by_name = {c.lower(): n for c, n in zip(delta_columns, names)}
    on = F.expr(" AND ".join(f"{quote(by_name[r.lower()])} = {quote(b)}"
                             for r, b in zip(columns, base_columns)))
    unnest = [*map(quote, names), *map(quote, base_columns), f"inline({quote(ROWS)})"]
    delta = ", ".join(f"{quote(n)} AS {quote(c)}" for n, c in zip(names, delta_columns))
    copy = ", ".join(map(quote, copy_columns))
    structs = [f"struct({delta}) AS {quote(aliases[0])}", f"struct({copy}) AS {quote(aliases[1])}"]
    return on, unnest, structs


def build(rows: DataFrame, columns: tuple[str, ...]) -> DataFrame | None:
    """`rows` (hash-partitioned by `columns`) grouped by `columns`, the other columns of each
    key's rows in a list (`ROWS`), sorted by `columns` within each partition so that a filter on
    them skips cached batches (lookup.py); None where `rows` has no other column. The grouping
    needs no exchange: `rows` is placed by `columns` already, and the index stays so placed."""
    others = [c for c in rows.columns if c not in columns]
    if not others:
        return None
    grouped = rows.groupBy(*columns).agg(F.collect_list(F.struct(*others)).alias(ROWS))
    return grouped.sortWithinPartitions(*columns)


def keys(copy: PartitionedBase, columns: tuple[str, ...]) -> DataFrame:
    """The copy's join columns `columns`, one row per key where the copy is an index (placed as
    the copy is), else one per row: what a base branch reads that only the keys' values answer
    (`BaseRelation.keys_only`; CC's base step at RMAT 2^18 aggregated 0.33 s against 1.31 s
    over every row, benchmarks/FINDINGS.md)."""
    return copy.df if copy.index is None else copy.index.select(*columns)


def unnested(index: DataFrame, columns: tuple[str, ...], names: list[str]) -> DataFrame:
    """The rows `index` was built from, in their columns' order `names`, placed as the index is
    (unnesting keeps a partition's rows in it): the base copy every other strategy reads."""
    return index.select(*columns, F.inline(ROWS)).select(*names)


def _joined_base(branch: Branch, ref: Ref) -> tuple[BaseRelation, RefJoin] | None:
    """The one base table of `branch`, with its join with the delta `ref`, if it has one."""
    if len(branch.bases) != 1:
        return None
    base = branch.bases[0]
    join = base.join_of(ref.binding)
    return None if join is None else (base, join)


def direct_select(select: exp.Expr, ref: str, base: str, joined: str) -> tuple[exp.Select, tuple[str, str]] | None:
    """`select`, which reads the bindings `ref` and `base` and nothing else, rewritten to read
    the one relation bound to `joined`, whose two struct columns are named as `select` names the
    two relations (returned too, ref's first): `path.Cost` then reads the field `Cost` of the
    column `path` (Spark resolves a name that qualifies no relation as a struct's field). The
    join's conditions stay, in WHERE: true on every joined row, and cheap. None where `select`
    is not so simple: another relation, a subquery, a USING or outer join, an unqualified or
    star column.

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT e.b, p.c + e.w FROM {r} AS p JOIN {t} AS e ON p.a = e.a WHERE e.w > 0", read="rasql")
    >>> q = q.transform(lambda n: exp.Placeholder(this=n.this, widget=True) if isinstance(n, exp.Placeholder) else n)
    >>> found = direct_select(q, "r", "t", "j")
    >>> found[0].sql("rasql"), found[1]
    ('SELECT e.b, p.c + e.w FROM {j} WHERE e.w > 0 AND p.a = e.a', ('p', 'e'))
    """
    if not isinstance(select, exp.Select) or any(
            select.args.get(k) for k in ("distinct", "group", "having", "qualify", "windows", "order",
                                         "limit", "offset", "laterals", "pivots", "with_")):
        return None
    from_ = select.args.get("from_")
    joins = select.args.get("joins") or []
    if from_ is None:
        return None
    tables = [from_.this, *[j.this for j in joins]]
    if len(tables) != 2 or not all(isinstance(t, exp.Table) and isinstance(t.this, exp.Placeholder)
                                   for t in tables):
        return None
    names = {t.this.name: t.alias_or_name for t in tables}
    if set(names) != {ref, base}:
        return None
    aliases = (names[ref], names[base])
    if any(j.side or (j.kind or "INNER").upper() not in {"INNER", "CROSS"} or j.args.get("using")
           for j in joins):
        return None
    if select.find(exp.Star, exp.Subquery, exp.Exists, exp.Lateral) or any(
            isinstance(n, exp.Query) for n in select.find_all(exp.Query) if n is not select):
        return None
    known = {a.lower() for a in aliases}
    if any(not c.table or c.args.get("db") or c.table.lower() not in known for c in select.find_all(exp.Column)):
        return None
    rewritten = select.copy()
    conditions = [j.args["on"] for j in rewritten.args.get("joins") or [] if j.args.get("on")]
    rewritten.set("joins", None)
    rewritten.set("from_", exp.From(this=exp.Table(
        this=exp.Placeholder(this=exp.to_identifier(joined), widget=True))))
    where = rewritten.args.get("where")
    parts = [*([where.this] if where else []), *conditions]
    rewritten.set("where", exp.Where(this=exp.and_(*parts)) if parts else None)
    return rewritten, aliases
