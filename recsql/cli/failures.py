"""What the CLI prints and returns when something goes wrong: spark-sql's layout, no traceback
unless -v, and spark-sql's exit codes."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from recsql import RecSQLError

OK, QUERY_ERROR, USAGE_ERROR, INTERRUPTED = 0, 1, 2, 130


def _spark(error: PySparkException) -> str:
    condition = error.getCondition() or "SPARK_ERROR"
    message = error.getMessage() if hasattr(error, "getMessage") else str(error)
    return message if message.startswith("[") else f"[{condition}] {message}"


def _other(error: BaseException) -> str:
    return (f"[RECSQL_INTERNAL_ERROR] {type(error).__name__}: {error} "
            "(run with -v for the traceback)")


# exception type -> its spark-sql style text (first match wins); a renderer takes errors of its
# own type (Any: only the isinstance test in `render` ties the two, which mypy cannot see)
RENDERERS: tuple[tuple[type[BaseException], Callable[[Any], str]], ...] = (
    (RecSQLError, str),
    (PySparkException, _spark),
    (Exception, _other),
)


def render(error: BaseException, verbose: bool = False) -> str:
    text = next(show(error) for kind, show in RENDERERS if isinstance(error, kind))
    if verbose:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return f"{trace.rstrip()}\n\n{text}"
    return text


def cancel_jobs(spark: SparkSession | None) -> None:
    """Ctrl-C: cancel what runs on the cluster (classic: cancelAllJobs; Connect: interruptAll)."""
    if spark is None:
        return
    for cancel in (lambda: spark.sparkContext.cancelAllJobs(), lambda: spark.interruptAll()):
        with contextlib.suppress(Exception):
            cancel()
            return
