"""`recsql serve`: a HiveServer2 (TCLIService Thrift) server, so BI tools and JDBC/ODBC clients
(beeline, DBeaver, Superset, dbt-spark, PyHive, Power BI, Tableau) run recursive SQL. Every
statement goes through recsql's public API: recursive ones through the fixpoint, all others
straight to Spark.

    server = recsql.serve(port=10000)      # serves in background threads (port=0: any free)
    server.wait()                          # or server.stop()

Needs the `server` extra (`pip install "recsql[server]"`: Apache Thrift and PyHive's generated
TCLIService definitions). The heavy modules load only when a server starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recsql.server.app import Server

INSTALL = 'recsql serve needs the server extra: pip install "recsql[server]" (missing: {name})'


def serve(spark: SparkSession | None = None, *, host: str = "127.0.0.1", port: int = 0,
          transport: str = "binary", http_path: str = "cliservice", auth: str = "none",
          password_file: str | None = None, ssl_cert: str | None = None,
          ssl_key: str | None = None, insecure: bool = False,
          idle_session_timeout: float = 3600.0,
          init: Callable[[SparkSession], None] | None = None, **options: Any) -> Server:
    """Start a HiveServer2-protocol server on `spark` (default: `recsql.session()`) and return
    it (`.port`, `.url`, `.stop()`, `.wait()`). Each client connection gets
    `spark.newSession()`, then `init(session)` (e.g. registering shared tables). `port=0` (the
    default here; the command's is 10000) picks a free port. Without authentication only a
    loopback `host` is served unless `insecure`."""
    try:
        from recsql.server.app import Server
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(INSTALL.format(name=error.name)) from error
    if spark is None:
        import recsql
        spark = recsql.session()
    return Server(spark, host=host, port=port, transport=transport, http_path=http_path,
                  auth_mode=auth, password_file=password_file, ssl_cert=ssl_cert, ssl_key=ssl_key,
                  insecure=insecure, idle_session_timeout=idle_session_timeout, init=init,
                  **options)


__all__ = ["serve"]
