"""A recursive group continued from a stored fixpoint: what a materialized view's refresh after
appends runs (`recsql.statements.materialized` decides when that is sound).

Semi-naive evaluation holds that every derivation from the state's rows has been made, except
those that read the delta. When rows are only appended to base tables and the query is monotone
(set UNION, min/max), the stored fixpoint R of the old tables is still derivable from the new
ones, and every derivation over the new tables that R does not already hold reads an appended
row, or a row derived from one. So each state starts as R, and the first delta is what each
branch derives from R with each appended table read as its new rows alone (its other references
read the whole of R); the loop then runs as always, over the whole new tables. That covers every
derivation only when a branch reads each appended table at most once (reading it twice, it also
derives from new x old and new x new pairs of rows): the statement layer checks this, and every
other condition, before asking for a seeded run.

After rows were removed or rewritten, the stored fixpoint is re-derived on the driver
(`recsql.executor.endgame.seeded`); where the driver cannot, the group runs from its base step,
a full recompute."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from recsql.executor.endgame.decide import last_iteration
from recsql.executor.endgame.seeded import SeedFiles, continue_on_driver
from recsql.executor.loop.fixpoint import GroupRun
from recsql.executor.loop.protocols import Context
from recsql.executor.run import GroupStart
from recsql.executor.state.relations import RelationState, union_all
from recsql.planner.model import Branch, CTEPlan, GroupStep
from recsql.planner.names import TableName


@dataclass(frozen=True)
class Seed:
    """Where a seeded group starts: per CTE (by key) its stored fixpoint and that fixpoint's row
    count, and per appended base table the rows appended since (read from the new files alone);
    `files`, where all are parquet: the same as files, for the driver to read itself."""

    states: dict[str, DataFrame]
    rows: dict[str, int]
    appended: dict[TableName, DataFrame]
    files: SeedFiles | None = None


def starting_from(seed: Seed) -> GroupStart:
    """`Executor.execute`'s `start` for a plan whose one recursive group continues from `seed`
    (the caller checked that the plan has one)."""
    return lambda ctx, group, schemas: SeededRun(ctx, group, schemas, seed)


class SeededRun(GroupRun):
    """A group whose states start from a stored fixpoint, and whose first delta is what the
    appended rows derive from it."""

    def __init__(self, ctx: Context, group: GroupStep, schemas: dict[str, StructType], seed: Seed) -> None:
        self.seed = seed
        # the branches as run over the appended rows, kept alive: rendered texts and shapes are
        # cached by the branch's id
        self.rewritten: dict[tuple[int, TableName], Branch | None] = {}
        super().__init__(ctx, group, schemas)

    def start(self) -> int:
        """On the driver when the stored state and the tables fit it (no Spark job: the stored
        state and the tables are read from their files), else on Spark."""
        if self.seed.files is not None and continue_on_driver(self, self.driver.info, self.seed.files):
            return last_iteration(self)
        if self.seed.files is not None and self.seed.files.rederive:
            return super().start()  # rows were removed: re-derived on the driver only
        for key, state in self.states.items():
            state.restore(placed(state, self.seed.states[key]), None, 0, self.seed.rows[key])
        self.step(0, self.appended_candidates)
        return 0

    def appended_candidates(self, iteration: int = 0) -> dict[str, tuple[DataFrame | None, str]]:
        """Each branch once per appended table it reads, that table read as its new rows alone
        and every other table whole: a derivation from new rows of two tables is one from new
        rows of the first and whole rows of the second (and is found twice, which a set or an
        extremum absorbs)."""
        result = {}
        for cte in self.group.ctes:
            parts = []
            for branch in cte.branches:
                for table in self.seed.appended:
                    df = self.from_appended(cte, branch, table)
                    if df is not None:
                        parts.append(df)
            result[cte.key] = (union_all(parts), "appended")
        return result

    def from_appended(self, cte: CTEPlan, branch: Branch, table: TableName) -> DataFrame | None:
        """What `branch` derives with `table` read as its new rows alone and its references as
        the whole stored states; None when it does not read `table`."""
        slot = (id(branch), table)
        if slot not in self.rewritten:
            self.rewritten[slot] = _over_appended(branch, table)
        rewritten = self.rewritten[slot]
        if rewritten is None:
            return None
        appended = self.seed.appended[table]
        refs = {ref.binding: self.states[ref.cte].all for ref in rewritten.refs}
        refs[APPENDED] = appended
        partitioned = {base.binding: appended for base in rewritten.bases if base.table == table}
        return self.shape(cte, rewritten, self.branch_df(cte, rewritten, refs, bases=partitioned))


APPENDED = "rq_appended"  # the binding of the appended rows in a rewritten branch


def _over_appended(branch: Branch, table: TableName) -> Branch | None:
    """`branch` with its plain read of `table` bound to `APPENDED`; None when it reads it
    neither so nor as a partitioned base."""
    select = branch.select.copy()
    found = any(base.table == table for base in branch.bases)
    for read in list(select.find_all(exp.Table)):
        if not isinstance(read.this, exp.Identifier) or TableName.of(read) != table:
            continue
        found = True
        # unaliased, the table's own name stays its alias (`edges.src` still resolves)
        alias = read.args.get("alias") or exp.TableAlias(this=exp.to_identifier(read.name))
        read.replace(exp.Table(this=exp.Placeholder(this=exp.to_identifier(APPENDED), widget=True),
                               alias=alias.copy()))
    return dataclasses.replace(branch, select=select) if found else None


def placed(state: RelationState, df: DataFrame) -> DataFrame:
    """A stored relation in the state's columns and types, placed by its key as the loop expects
    and checkpointed (the stored table may be replaced while the group runs)."""
    columns = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in state.schema.fields]
    return state.shuffle_by_key(df.select(*columns)).localCheckpoint(eager=True)


__all__ = ["Seed", "SeededRun", "placed", "starting_from"]
