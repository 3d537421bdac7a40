"""A Superset SQL Lab round trip of a small recursive query against `recsql serve`, with
Superset's default Hive poll interval and with the one docs/server.md recommends.

    python -m benchmarks.superset --runs 7 --out benchmarks/SUPERSET.md

Superset 6.1 in its own virtualenv (tests/clients/venvs.py builds it from PyPI on first use),
served by gunicorn on 127.0.0.1; `recsql serve` in a process of its own. A round trip is the
wall time of one `POST /api/v1/sqllab/execute/` (synchronous, as SQL Lab runs without Celery)
as the client sees it, rows included. Runs after a warm-up, the two configurations one after the
other (one Superset at a time); medians with min-max. Not a test: timings on a shared 2-core
machine vary.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

# set recursion (UNION), which recsql runs (Spark's own recursion takes only UNION ALL)
QUERY = """WITH RECURSIVE reach (node) AS (
  SELECT 1
  UNION
  SELECT e.dst FROM reach r JOIN edges e ON r.node = e.src)
SELECT node FROM reach"""
TRIVIAL = "SELECT 1 AS one"


def round_trips(api, database: int, sql: str, runs: int) -> list[float]:
    api.sql_lab(database, "analytics", sql)  # warm-up
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = api.sql_lab(database, "analytics", sql)
        seconds.append(time.perf_counter() - started)
        assert answer["status"] == "success", answer
    return seconds


def measure(home: Path, server, poll: str, runs: int) -> dict[str, list[float]]:
    from tests.clients.superset import Superset, SupersetAPI

    app = Superset(home, poll=poll).set_up()
    try:
        api = SupersetAPI(app.start().url)
        database = api.add_database("recsql", f"hive+recsql://analyst@127.0.0.1:{server.port}/analytics")
        return {sql: round_trips(api, database, sql, runs) for sql in (QUERY, TRIVIAL)}
    finally:
        app.stop()


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", default="benchmarks/SUPERSET.md")
    args = parser.parse_args()

    from tests.clients import oracles
    from tests.clients.conftest import RecSQLServer
    from tests.clients.superset import POLL

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="recsql-bench-superset-") as scratch:
        homes = [Path(scratch, name) for name in ("serve", "default", "tuned")]
        for home in homes:
            home.mkdir()
        server = RecSQLServer(homes[0]).start()
        try:
            connection, cursor = server.cursor()
            cursor.execute("CREATE DATABASE IF NOT EXISTS analytics")
            cursor.execute("CREATE TABLE analytics.edges (src INT, dst INT, cost INT) USING parquet")
            cursor.execute("INSERT INTO analytics.edges VALUES "
                           + ", ".join(f"({s}, {d}, {c})" for s, d, c in oracles.edges()))
            connection.close()
            tuned = measure(homes[2], server, POLL, args.runs)
            default = measure(homes[1], server, "", args.runs)
        finally:
            server.stop()
    load_after = os.getloadavg()

    text = f"""# Superset SQL Lab round trip against `recsql serve`

- command: `python -m benchmarks.superset --runs {args.runs} --out {args.out}`
- machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()};
  apache-superset 6.1.0 (gunicorn, 1 worker, 4 threads, SQLite metadata database), database
  `hive+recsql://` (recsql's SQLAlchemy dialect, Superset's Hive engine spec); `recsql serve`
  on Spark `local[2]`, the dbt seed's 93 edges in `analytics.edges`
- load average before / after: {' / '.join(f'{x:.2f}' for x in load_before)} /
  {' / '.join(f'{x:.2f}' for x in load_after)}
- a round trip: one `POST /api/v1/sqllab/execute/` (synchronous), timed by the client; {args.runs}
  runs after a warm-up; median (min-max), seconds

| query | Superset's default (polls every 5 s) | `{POLL}` |
|---|--:|--:|
| the recursive query below | {summary(default[QUERY])} | {summary(tuned[QUERY])} |
| `{TRIVIAL}` | {summary(default[TRIVIAL])} | {summary(tuned[TRIVIAL])} |

```sql
{QUERY}
```
"""
    with open(args.out, "w") as stream:
        stream.write(text)
    print(text)


if __name__ == "__main__":
    main()
