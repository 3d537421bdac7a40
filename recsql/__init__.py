"""recsql: recursive SQL with aggregates in the recursion (RaSQL), run on Apache Spark.

    import recsql
    df = recsql.sql("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
                    "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge "
                    "WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path")
"""

from recsql.api import explain, run, script, sql
from recsql.errors import (
    RecSQLAnalysisError,
    RecSQLEnvironmentError,
    RecSQLError,
    RecSQLExecutionError,
    RecSQLParseError,
)
from recsql.executor.run import Result
from recsql.executor.session import session
from recsql.executor.stats import IterationStats
from recsql.server import serve

__version__ = "0.1.0"

__all__ = [
    "IterationStats", "RecSQLAnalysisError", "RecSQLEnvironmentError", "RecSQLError",
    "RecSQLExecutionError", "RecSQLParseError", "Result", "explain", "run", "script", "session",
    "serve", "sql", "__version__",
]
