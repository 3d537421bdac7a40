"""Spark's runtime failures inside a fixpoint, as recsql errors.

The error keeps Spark's own condition (`DIVIDE_BY_ZERO`, `ARITHMETIC_OVERFLOW`, ...) and SQLSTATE,
names the CTE and the iteration, and adds advice only where it is true for that condition: a
division by zero is not an overflow, and widening a column does not fix it.
"""

from __future__ import annotations

import re

from recsql.errors import RecSQLExecutionError

# What Spark reports when a job needs a `localCheckpoint`ed block whose executor is gone.
LOST_BLOCK_MARKERS = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "Checkpoint block rdd_",
                      "FetchFailed", "ExecutorLostFailure", "BlockMissingException")


class BlocksLost(RecSQLExecutionError):
    """An iteration's action failed because checkpointed blocks died with their executor: the
    loop's safeguard (`protocols.Safeguard`) may bring it back to saved work."""


def lost_blocks(trace: str) -> bool:
    return any(marker in trace for marker in LOST_BLOCK_MARKERS)


_WIDEN = ("widen the column: cast it in the base branch to BIGINT, DECIMAL(38, 0) or DOUBLE "
          "(a recursive CTE's column types come from its base branches)")

# Spark condition (before any `.SUBCLASS`) -> (recsql's advice, the try_ function it names).
# Spark's own message usually suggests the try_ function already; the advice is added when it does
# not (None: always added, as widening the column is recsql's own advice).
ADVICE: dict[str, tuple[str, str | None]] = {
    "ARITHMETIC_OVERFLOW": (_WIDEN + ", or use try_add, try_subtract or try_multiply to get NULL "
                            "instead", None),
    "CAST_OVERFLOW": (_WIDEN + ", or use try_cast to get NULL instead", None),
    "NUMERIC_VALUE_OUT_OF_RANGE": ("widen the decimal (up to DECIMAL(38, s)) or use DOUBLE",
                                   None),
    "DIVIDE_BY_ZERO": ("use try_divide(a, b) to get NULL instead", "try_divide"),
    "REMAINDER_BY_ZERO": ("use try_mod(a, b) to get NULL instead", "try_mod"),
    "CAST_INVALID_INPUT": ("use try_cast(value AS type) to get NULL instead", "try_cast"),
    "INVALID_ARRAY_INDEX_IN_ELEMENT_AT": ("use try_element_at(array, index) to get NULL instead",
                                          "try_element_at"),
    "INVALID_ARRAY_INDEX": ("use try_element_at(array, index) (1-based) to get NULL instead",
                            "try_element_at"),
}


def runtime_failure(cte_name: str, iteration: int, condition: str | None, message: str,
                    sqlstate: str | None = None) -> RecSQLExecutionError:
    """The recsql error for Spark's `condition`/`message` raised while evaluating a CTE."""
    condition = condition or "SPARK_ERROR"
    text = _first_line(message, condition)
    advice, try_function = ADVICE.get(condition.split(".")[0], ("", None))
    if advice and not (try_function and try_function in text):
        text = f"{text.rstrip('. ')}. To avoid it, {advice}"
    error = RecSQLExecutionError(
        f"CTE `{cte_name}` failed at iteration {iteration}: {text}",
        condition=condition,
    )
    error.sqlstate = sqlstate or _sqlstate(message)
    return error


def from_exception(cte_name: str, iteration: int, error: Exception) -> RecSQLExecutionError:
    """From a classified pyspark exception (classic or Connect: the same public API)."""
    condition = getattr(error, "getCondition", lambda: None)()
    sqlstate = getattr(error, "getSqlState", lambda: None)()
    return runtime_failure(cte_name, iteration, condition, str(error), sqlstate)


def from_trace(cte_name: str, iteration: int, trace: str) -> RecSQLExecutionError:
    """From a failed job pyspark does not classify (a Py4J trace, e.g. FAILED_READ_FILE): the
    outermost condition, and its root cause when that differs; never the JVM stack trace."""
    conditions = re.findall(r"\[([A-Z][A-Z_.]+)\] ([^\n]*)", trace)
    if not conditions:
        first = next((ln for ln in trace.splitlines() if ln.strip()), "Spark job failed")
        conditions = [("SPARK_JOB_FAILED", first.strip())]
    (outer, message), (root, cause) = conditions[0], conditions[-1]
    detail = message if root == outer else f"{_first_line(message, outer)} Caused by [{root}] {cause}"
    return runtime_failure(cte_name, iteration, outer, detail, _sqlstate(message))


def _first_line(message: str, condition: str) -> str:
    """Spark's first line without its `[CONDITION]` prefix and SQLSTATE."""
    line = next((ln for ln in message.strip().splitlines() if ln.strip()), condition)
    line = re.sub(rf"^\[{re.escape(condition)}\]\s*", "", line.strip())
    return re.sub(r"\s*SQLSTATE: \w+\.?", "", line).strip()


def _sqlstate(message: str) -> str | None:
    match = re.search(r"SQLSTATE: (\w+)", message)
    return match.group(1) if match else None
