"""recsql: recursive SQL with aggregates in the recursion (RaSQL), run on Apache Spark.

    import recsql
    df = recsql.sql("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
                    "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge "
                    "WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path")

The public names load on first use, so that `import recsql.sqlalchemy` (the SQLAlchemy dialect,
installed without recsql's dependencies into a BI tool's environment) does not load Spark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recsql.api import explain, refresh, register_aggregate, run, script, sql
    from recsql.errors import (
        RecSQLAnalysisError,
        RecSQLEnvironmentError,
        RecSQLError,
        RecSQLExecutionError,
        RecSQLParseError,
    )
    from recsql.executor.loop.session import session
    from recsql.executor.loop.stats import IterationStats
    from recsql.server import serve
    from recsql.statements import Result

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "explain": "recsql.api", "refresh": "recsql.api", "run": "recsql.api", "script": "recsql.api", "sql": "recsql.api",
    "register_aggregate": "recsql.api",
    "RecSQLAnalysisError": "recsql.errors", "RecSQLEnvironmentError": "recsql.errors",
    "RecSQLError": "recsql.errors", "RecSQLExecutionError": "recsql.errors",
    "RecSQLParseError": "recsql.errors", "Result": "recsql.statements",
    "session": "recsql.executor.loop.session", "IterationStats": "recsql.executor.loop.stats",
    "serve": "recsql.server",
}

__all__ = [
    "IterationStats", "RecSQLAnalysisError", "RecSQLEnvironmentError", "RecSQLError",
    "RecSQLExecutionError", "RecSQLParseError", "Result", "explain", "refresh", "register_aggregate", "run", "script",
    "session", "serve", "sql", "__version__",
]


def load_ipython_extension(ipython) -> None:
    """`%load_ext recsql`: the `%%recsql` and `%recsql` magics (recsql/notebook; IPython is
    imported only now)."""
    from recsql.notebook import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'recsql' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
