"""Spark's own recursion limits, `spark.sql.cteRecursionLevelLimit` and
`spark.sql.cteRecursionRowLimit` (Spark 4.3's key names), applied to UNION ALL recursion when the
user sets them, with Spark's conditions. recsql's `spark.recsql.maxIterations` bounds every
fixpoint regardless; Spark's defaults (100 levels) are not imposed on queries recsql extends.

Measured on Spark 4.3: with a level limit L, an iteration at level L or beyond that still yields
rows is an error; with a row limit R, an iteration that yields rows and brings the total to R or
more is an error."""

from __future__ import annotations

from dataclasses import dataclass

from recsql.errors import RecSQLExecutionError
from recsql.planner.model import GroupStep

LEVEL_KEY = "spark.sql.cteRecursionLevelLimit"
ROW_KEY = "spark.sql.cteRecursionRowLimit"


@dataclass(frozen=True)
class SparkLimits:
    levels: int | None = None
    rows: int | None = None
    written: bool = False  # the level limit is the query's own MAX RECURSION LEVEL clause

    @classmethod
    def of(cls, spark, group: GroupStep) -> SparkLimits:
        """The limits for a UNION ALL (bag) group: a CTE's own `MAX RECURSION LEVEL n`, else the
        session's settings if the user set them."""
        if not all(c.bag for c in group.ctes):
            return cls()
        own = [c.level_limit for c in group.ctes if c.level_limit is not None]
        return cls(min(own) if own else _int(spark.conf.get(LEVEL_KEY, None)),
                   _int(spark.conf.get(ROW_KEY, None)), bool(own))

    @property
    def active(self) -> bool:
        return self.levels is not None or self.rows is not None

    def check(self, cte: str, iteration: int, delta_rows: int, total_rows: int) -> None:
        if not delta_rows:
            return
        if self.levels is not None and iteration >= self.levels:
            fix = (f"write MAX RECURSION LEVEL {self.levels * 10}" if self.written
                   else f"SET {LEVEL_KEY} = {self.levels * 10}")
            raise _exceeded("level", self.levels, fix, cte,
                            f"iteration {iteration} still yielded {delta_rows} row(s)")
        if self.rows is not None and total_rows >= self.rows:
            raise _exceeded("row", self.rows, f"SET {ROW_KEY} = {self.rows * 10}", cte,
                            f"{total_rows} row(s) after iteration {iteration}")


def recursion_ends(group: GroupStep, limits: SparkLimits, iteration: int,
                   deltas: dict[str, int], totals: dict[str, int]) -> bool:
    """Before the iteration after `iteration`, with each CTE's last delta and total rows by key:
    whether the final query's LIMIT is met (planner `_limit_ends_recursion`), which ends the
    fixpoint; else Spark's limits, which raise. Both loops ask it, the Spark loop and the
    driver's, so a limit keeps neither from the other."""
    target, key = group.row_target, group.row_target_cte
    if target is not None and key is not None and totals[key] >= target:
        return True
    for cte in group.ctes:
        limits.check(cte.name, iteration, deltas[cte.key], totals[cte.key])
    return False


def _exceeded(kind: str, limit: int, fix: str, cte: str, state: str) -> RecSQLExecutionError:
    return RecSQLExecutionError(
        f"Recursion {kind} limit {limit} reached but CTE `{cte}` has not exhausted: {state}. "
        f"Raise it ({fix}) if the recursion terminates",
        condition=f"RECURSION_{kind.upper()}_LIMIT_EXCEEDED",
    )


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)
