"""What a failure looks like on the wire: a `TStatus` with the SQLSTATE and recsql's (or Spark's)
spark-sql style message."""

from __future__ import annotations

from pyspark.errors import PySparkException
from TCLIService import ttypes

from recsql.errors import (
    RecSQLAnalysisError,
    RecSQLError,
    RecSQLExecutionError,
    RecSQLParseError,
)


class ProtocolError(Exception):
    """A request the server refuses (unknown handle, wrong state): an ERROR_STATUS answer."""

    def __init__(self, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Cancelled(Exception):
    """Raised from the progress callback: the fixpoint stops between iterations."""


# recsql's own errors carry no SQLSTATE unless they wrap Spark's; first match wins
RECSQL_SQLSTATES: tuple[tuple[type, str], ...] = (
    (RecSQLParseError, "42601"),      # syntax error
    (RecSQLAnalysisError, "42000"),   # syntax error or access rule violation
    (RecSQLExecutionError, "22000"),  # data exception
    (RecSQLError, "42000"),
)


def describe(error: BaseException) -> tuple[str, str]:
    """(SQLSTATE, message) of a failure."""
    if isinstance(error, ProtocolError):
        return error.sqlstate, str(error)
    if isinstance(error, Cancelled):
        return "HY008", "[RECSQL_OPERATION_CANCELLED] The operation was cancelled"
    if isinstance(error, RecSQLError):
        fallback = next(state for kind, state in RECSQL_SQLSTATES if isinstance(error, kind))
        return error.sqlstate or _spark_sqlstate(error) or fallback, str(error)
    if isinstance(error, PySparkException):
        condition = error.getCondition() or "SPARK_ERROR"
        message = error.getMessage() if hasattr(error, "getMessage") else str(error)
        text = message if message.startswith("[") else f"[{condition}] {message}"
        return error.getSqlState() or "XX000", text
    return "XX000", f"[RECSQL_INTERNAL_ERROR] {type(error).__name__}: {error}"


def _spark_sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of the Spark error a recsql error was made from (its context), if any."""
    seen = error.__context__
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, PySparkException):
            return seen.getSqlState()
        seen = seen.__context__
    return None


def ok() -> ttypes.TStatus:
    return ttypes.TStatus(statusCode=ttypes.TStatusCode.SUCCESS_STATUS)


def failed(error: BaseException) -> ttypes.TStatus:
    sqlstate, message = describe(error)
    return ttypes.TStatus(statusCode=ttypes.TStatusCode.ERROR_STATUS, sqlState=sqlstate,
                          errorCode=0, errorMessage=message)
