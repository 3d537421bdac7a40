"""The error hierarchy. Every user mistake surfaces as a `RecSQLError` subclass.

Messages follow spark-sql's layout so people who know Spark read them at once::

    [RECSQL_UNKNOWN_COLUMN] Column `Cst` of `path` does not exist. Did you mean `Cost`? (line 3, pos 12)

    == SQL ==
    WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
    ...
    ------------^^^
"""

from __future__ import annotations


class RecSQLError(Exception):
    """Root of every error recsql raises on purpose.

    `condition` is a stable upper-case name (like Spark's error classes); `line` (1-based) and
    `pos` (0-based column, as spark-sql prints it) locate the mistake in `sql` when known.
    """

    condition = "RECSQL_ERROR"
    sqlstate: str | None = None  # Spark's SQLSTATE when the error is Spark's own

    def __init__(
        self,
        message: str,
        *,
        condition: str | None = None,
        line: int | None = None,
        pos: int | None = None,
        length: int = 1,
        sql: str | None = None,
    ) -> None:
        self.message = message
        if condition:
            self.condition = condition
        self.line = line
        self.pos = pos
        self.length = max(1, length)
        self.sql = sql
        super().__init__(self.render())

    def with_sql(self, sql: str) -> RecSQLError:
        """Attach the statement text (for the caret rendering) if not already known."""
        if self.sql is None:
            self.sql = sql
            self.args = (self.render(),)
        return self

    def render(self) -> str:
        where = f" (line {self.line}, pos {self.pos})" if self.line is not None else ""
        head = f"[{self.condition}] {self.message}{where}"
        if self.sql is None or self.line is None:
            return head
        return f"{head}\n\n== SQL ==\n{caret_block(self.sql, self.line, self.pos or 0, self.length)}"

    def __str__(self) -> str:
        return self.render()


def caret_block(sql: str, line: int, pos: int, length: int = 1) -> str:
    """The query with a `----^^^` line under line `line`, as spark-sql prints it."""
    lines = sql.splitlines() or [""]
    line = min(max(line, 1), len(lines))
    caret = "-" * pos + "^" * max(1, min(length, 80))
    return "\n".join([*lines[:line], caret, *lines[line:]])


class RecSQLParseError(RecSQLError):
    """The text is not valid RaSQL/Spark SQL."""

    condition = "RECSQL_PARSE_ERROR"


class RecSQLAnalysisError(RecSQLError):
    """The text parses but means nothing valid: unknown names, rule violations, type mismatches."""

    condition = "RECSQL_ANALYSIS_ERROR"


class RecSQLExecutionError(RecSQLError):
    """The query was valid but its evaluation failed (iteration limit, overflow, Spark failure)."""

    condition = "RECSQL_EXECUTION_ERROR"


class RecSQLEnvironmentError(RecSQLError):
    """Spark cannot start here (no usable Java, bad master URL)."""

    condition = "RECSQL_ENVIRONMENT"
