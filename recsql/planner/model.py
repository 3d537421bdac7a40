"""Plan objects: what the planner decides, in a form the executor runs and people can read.

A `QueryPlan` is a list of `Step`s in dependency order (strata): plain CTEs (`ViewStep`) and
recursive groups (`GroupStep`), then the final query. Branch ASTs already have every relation the
executor must supply replaced by a `{binding}` placeholder:

* `{r<k>}`: the k-th reference of a branch to a CTE of its own recursive group (delta or all);
* `{cte_<name>}`: a completed CTE of an earlier stratum;
* `{base_<k>}`: a base table the executor pre-partitions by its join columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from recsql.planner.invariants import invariant_subqueries
from recsql.planner.names import TableName
from recsql.planner.seeds import shift_seeds

# Head aggregate spellings -> canonical function (docs/dialect.md section 2): RaSQL's, and Spark's
# own aggregates that are a lattice's join (associative, commutative, idempotent), so that their
# value over a union is their value over the parts' values. The aggregates users declare
# (`DeclaredAggregate`) are found in the catalog.
AGGREGATES = {
    "min": "min", "mmin": "min",
    "max": "max", "mmax": "max",
    "sum": "sum", "msum": "sum",
    "count": "count", "mcount": "count",
    "bit_or": "bit_or", "bit_and": "bit_and",
    "bool_or": "bool_or", "some": "bool_or", "bool_and": "bool_and", "every": "bool_and",
}
# Aggregates whose value is a sum over contributors (the others are extrema).
SUMMING = {"sum", "count"}
# Payload spellings -> the extremum whose winner they follow (docs/dialect.md section 2).
PAYLOADS = {"argmin": "min", "argmax": "max"}

DELTA, ALL = "delta", "all"


@dataclass(frozen=True)
class DeclaredAggregate:
    """A head aggregate a user declared (`CREATE AGGREGATE`, `recsql.register_aggregate`), as
    the catalog keeps it: its merge, an expression over its two `parameters`, its identity, and
    the type of its values (Spark SQL). What it means is `planner/aggregates.declared`."""

    name: str
    parameters: tuple[str, str]
    merge: exp.Expr
    identity: exp.Expr
    type: exp.DataType
    temporary: bool = False


@dataclass(frozen=True)
class HeadColumn:
    name: str
    agg: str | None = None  # canonical aggregate, None for a group-key or payload column
    # the aggregate's declaration, when users declared it (`agg` is then its lower-case name)
    declared: DeclaredAggregate | None = field(default=None, compare=False, hash=False)
    # a payload column: the min()/max() head column whose winning derivation it comes from,
    # and that column's extremum ("min" or "max")
    of: str | None = None
    extremum: str | None = None
    # where the column is written (`line`, `pos`, `length`), for errors found at run time
    location: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_key(self) -> bool:
        """A group-key column: neither aggregated nor a payload (both depend on the key)."""
        return self.agg is None and self.of is None

    def render(self) -> str:
        if self.of is not None:
            return f"arg{self.extremum}({self.of}) AS {self.name}"
        return f"{self.agg}() AS {self.name}" if self.agg else self.name


@dataclass(frozen=True)
class ComparedColumn:
    """A column a SEARCH clause orders by or a CYCLE clause compares (search_cycle.py), checked
    once the anchor's types are known, before any recursive term runs."""

    name: str
    clause: str  # "SEARCH" or "CYCLE"
    location: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Ref:
    """A branch's reference to a CTE of its own recursive group."""

    binding: str  # placeholder name in the branch AST
    cte: str  # canonical (lower-case) CTE name
    alias: str  # the name the branch uses for it


@dataclass(frozen=True)
class RefJoin:
    """A recursive reference equi-joined with a base table on all of the base's partition columns."""

    ref: str  # the `Ref.binding`
    columns: tuple[str, ...]  # the reference's head columns, paired with the base's columns in order


@dataclass(frozen=True)
class BaseRelation:
    """A base table in a recursive branch, pre-partitioned by the columns it joins a ref on."""

    binding: str
    table: TableName  # the table's full name, as written
    columns: tuple[str, ...]  # partition columns, in the order of the ref's partition key
    # every reference joined with it on all of `columns`: what the executor's strategies (skew,
    # roll-over) need of the branch's joins, recorded here so they never re-read the SQL
    joins: tuple[RefJoin, ...] = ()
    # a base branch's read that the copy's distinct keys answer exactly (`build.reads_keys_only`):
    # it reads `columns` alone, row by row, into a relation that keeps no row's multiplicity,
    # so the executor may bind one row per key (the adjacency index's keys) for the whole copy
    keys_only: bool = False

    def join_of(self, ref: str) -> RefJoin | None:
        """The join of reference binding `ref` with this base, if any."""
        return next((j for j in self.joins if j.ref == ref), None)

    @property
    def key(self) -> BaseKey:
        """Identifies the pre-partitioned base across branches (SQL names are case-insensitive)."""
        return base_key(self.table, self.columns)


BaseKey = tuple[tuple[str, ...], tuple[str, ...]]  # the table's name parts, the columns


def base_key(table: TableName, columns: tuple[str, ...]) -> BaseKey:
    return table.key, tuple(c.lower() for c in columns)


@dataclass
class Branch:
    index: int  # 1-based position in the CTE body
    select: exp.Query  # the branch with bindings in place
    refs: tuple[Ref, ...] = ()
    variants: tuple[tuple[str, ...], ...] = ()  # semi-naive: DELTA/ALL per ref, per variant
    contributor: tuple[exp.Expr, ...] = ()  # sum/count: what identifies a contributor
    bases: tuple[BaseRelation, ...] = ()
    # every reference joins a base table on its whole partition key: the join needs no exchange
    copartitioned: bool = False
    # calls a random function with a seed (planner/seeds.py): a recursive branch then runs with
    # other seeds at every iteration (`select_at`), so its text is rendered afresh each time
    seeded: bool = False

    @property
    def recursive(self) -> bool:
        return bool(self.refs)

    @property
    def invariants(self) -> list[exp.Subquery]:
        """A recursive branch's scalar subqueries whose value no iteration changes
        (`planner/invariants.py`): the executor evaluates each once, before the group's loop."""
        return invariant_subqueries(self.select)

    def select_at(self, iteration: int, args: dict | None = None) -> exp.Expr:
        """The branch as Spark runs it at `iteration` (1: the first recursive step): a recursive
        term's seeds shifted by the steps before it (`seeds.shift_seeds`; `args`: the statement's
        `:name` parameters). `select` itself when nothing shifts."""
        if not (self.recursive and self.seeded):
            return self.select
        return shift_seeds(self.select, iteration, args)

    @property
    def aggregating(self) -> bool:
        """A UNION ALL term that aggregates each step's rows (GROUP BY, an aggregate, a window):
        its output over the whole delta is not the union of its outputs over slices of it."""
        return self.select.find(exp.Group, exp.AggFunc, exp.Window) is not None

    @property
    def splittable(self) -> bool:
        """The branch is the union of its runs over disjoint sets of join keys: a plain
        select-project-inner-join (an outer join would also keep the rows no key set holds)."""
        select = self.select
        if not isinstance(select, exp.Select) or select.args.get("distinct") or self.aggregating:
            return False
        return all(not j.side and (j.kind or "INNER").upper() in {"INNER", "CROSS"}
                   for j in select.args.get("joins") or [])


@dataclass(frozen=True)
class KeyBound:
    """What bounds a min()/max() CTE's value by its own key (`planner/keybound.py`): its one
    base branch makes a group `(a, a)` for every value `a` of the partitioned copy's key column,
    so that group's value never passes its key (min() only falls, max() only rises). A
    recursive branch's candidate `(x, v)` whose group key `x` is read from a column of that same
    copy, and whose `v` is not below `x` (min) or above it (max), then changes nothing, if
    every value of that column is a key of the copy (a fact the executor learns from a statement
    whose first iteration a `witnesses` branch ran unfiltered)."""

    base: BaseKey  # the partitioned copy whose distinct keys the base branch reads
    column: str  # its key column (the base branch's two items)
    extremum: str  # "min" or "max"
    # recursive branch index -> the copy's column that its group key reads
    sources: tuple[tuple[int, str], ...] = ()
    # the recursive branches (indexes) that make one candidate per row of the copy in the first
    # iteration (`planner/keybound.py`): whose groups then tell whether the fact holds
    witnesses: tuple[int, ...] = ()

    def source(self, branch: Branch) -> str | None:
        return next((c for i, c in self.sources if i == branch.index), None)


@dataclass
class CTEPlan:
    name: str  # as written
    head: tuple[HeadColumn, ...]
    branches: list[Branch]
    bag: bool = False  # UNION ALL: no deduplication, no aggregates
    # a linear transitive closure's non-linear twin (planner/doubling.py), None otherwise, and
    # the delta rules of the round that switches to it (every reference reading the whole relation)
    doubling: Branch | None = None
    doubling_switch: tuple[tuple[str, ...], ...] = ()
    level_limit: int | None = None  # Spark's `MAX RECURSION LEVEL n` written on this CTE
    compared: tuple[ComparedColumn, ...] = ()  # its SEARCH and CYCLE columns
    key_bound: KeyBound | None = None  # candidates that cannot change it (`KeyBound`)

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.head]

    @property
    def group_key(self) -> list[str]:
        return [c.name for c in self.head if c.is_key]

    @property
    def aggregates(self) -> list[HeadColumn]:
        return [c for c in self.head if c.agg]

    def payload(self, column: HeadColumn) -> list[HeadColumn]:
        """The payload columns that travel with aggregated `column`'s winner, in head order
        (the order in which they break its ties)."""
        return [c for c in self.head if c.of is not None and c.of.lower() == column.name.lower()]

    @property
    def dependent(self) -> list[str]:
        """Aggregated and payload columns: functions of the group key, never keys themselves."""
        return [c.name for c in self.head if not c.is_key]

    @property
    def partition_key(self) -> list[str]:
        """Rows are placed by their group key, never by an aggregated column (PARALAGG IV-A)."""
        return self.group_key

    @property
    def summing(self) -> bool:
        return any(c.agg in SUMMING for c in self.head)

    @property
    def base_branches(self) -> list[Branch]:
        return [b for b in self.branches if not b.recursive]

    @property
    def recursive_branches(self) -> list[Branch]:
        return [b for b in self.branches if b.recursive]


@dataclass
class ViewStep:
    """A CTE with no recursion and no head aggregate: an ordinary Spark query."""

    name: str
    query: exp.Query
    stratum: int
    columns: tuple[str, ...] = ()  # the CTE's column list, if it has one

    @property
    def key(self) -> str:
        return self.name.lower()


@dataclass
class GroupStep:
    """CTEs that reach their fixpoint together (one CTE unless mutually recursive)."""

    ctes: list[CTEPlan]
    stratum: int
    # UNION ALL recursion read by `SELECT ... FROM cte LIMIT n` (no ORDER BY): as in Spark, the
    # recursion may stop once this many rows exist
    row_target: int | None = None
    row_target_cte: str | None = None  # the key of the CTE whose rows count toward it

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.ctes]

    @property
    def recursive(self) -> bool:
        return any(c.recursive_branches for c in self.ctes)


Step = ViewStep | GroupStep


def cte_binding(name: str) -> str:
    """The name a CTE's DataFrame is bound to in the plan's queries (`{rq_cte_path}`)."""
    return f"rq_cte_{name.lower()}"


@dataclass
class QueryPlan:
    steps: list[Step]
    final: exp.Query  # the main query, CTE references bound as `{cte_<name>}`
    sql: str = ""
    parameters: set[str] = field(default_factory=set)  # `:name` markers used
    demand: list[str] = field(default_factory=list)  # filters pushed into recursions, or why not

    @property
    def groups(self) -> list[GroupStep]:
        return [s for s in self.steps if isinstance(s, GroupStep)]

    @property
    def recursive(self) -> bool:
        return bool(self.groups)
