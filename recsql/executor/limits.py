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

LEVEL_KEY = "spark.sql.cteRecursionLevelLimit"
ROW_KEY = "spark.sql.cteRecursionRowLimit"


@dataclass(frozen=True)
class SparkLimits:
    levels: int | None = None
    rows: int | None = None

    @classmethod
    def of(cls, spark, bag: bool) -> SparkLimits:
        """The limits the user set in this session, for a UNION ALL (bag) recursion."""
        if not bag:
            return cls()
        return cls(_int(spark.conf.get(LEVEL_KEY, None)), _int(spark.conf.get(ROW_KEY, None)))

    @property
    def active(self) -> bool:
        return self.levels is not None or self.rows is not None

    def check(self, cte: str, iteration: int, delta_rows: int, total_rows: int) -> None:
        if not delta_rows:
            return
        if self.levels is not None and iteration >= self.levels:
            raise _exceeded("level", self.levels, LEVEL_KEY, cte,
                            f"iteration {iteration} still yielded {delta_rows} row(s)")
        if self.rows is not None and total_rows >= self.rows:
            raise _exceeded("row", self.rows, ROW_KEY, cte,
                            f"{total_rows} row(s) after iteration {iteration}")


def _exceeded(kind: str, limit: int, key: str, cte: str, state: str) -> RecSQLExecutionError:
    return RecSQLExecutionError(
        f"Recursion {kind} limit {limit} reached but CTE `{cte}` has not exhausted: {state}. "
        f"Raise it (SET {key} = {limit * 10}) if the recursion terminates",
        condition=f"RECURSION_{kind.upper()}_LIMIT_EXCEEDED",
    )


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)
