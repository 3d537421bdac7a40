"""A Superset SQL Lab round trip of small recursive queries against `recsql serve`, with
Superset's default Hive poll interval and with the one docs/server.md recommends.

    python -m benchmarks superset [--runs 7] [--warmup 3] [--out FILE]

Superset 6.1 in its own virtualenv (tests/clients/venvs.py builds it from PyPI on first use),
served by gunicorn on 127.0.0.1; `recsql serve` in a process of its own. A round trip is the
wall time of one `POST /api/v1/sqllab/execute/` (synchronous, as SQL Lab runs without Celery)
as the client sees it, rows included, beside the same query over PyHive without Superset. Both
Supersets run side by side, the three interleaved after warm-up rounds; medians with min-max.
Not a test: timings on a shared 2-core machine vary.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from .driverpath import TINY as TINY_SSSP
from .driverpath import TINY_ANSWER, TINY_EDGES
from .measure import load, stamp

# set recursion (UNION), which recsql runs (Spark's own recursion takes only UNION ALL)
QUERY = """WITH RECURSIVE reach (node) AS (
  SELECT 1
  UNION
  SELECT e.dst FROM reach r JOIN edges e ON r.node = e.src)
SELECT node FROM reach"""
TRIVIAL = "SELECT 1 AS one"
# the analyst's case of issue 38 (docs/server.md): SSSP over 4 edges, as `driverpath.TINY`
TINY = TINY_SSSP.replace(" edge e", " tiny_edge e")
QUERIES = (QUERY, TINY, TRIVIAL)


def sql_lab(api, database: int, sql: str) -> float:
    started = time.perf_counter()
    answer = api.sql_lab(database, "analytics", sql)
    seconds = time.perf_counter() - started
    assert answer["status"] == "success", answer
    check(sql, [tuple(row.values()) for row in answer["data"]], "through SQL Lab")
    return seconds


def direct(server, sql: str) -> float:
    """The same query over a new PyHive connection (what Superset's engine does, minus Superset)."""
    started = time.perf_counter()
    rows = server.query(sql, database="analytics")
    seconds = time.perf_counter() - started
    check(sql, rows, "over PyHive")
    return seconds


def check(sql: str, rows, via: str) -> None:
    """The 4-edge SSSP's answer against its hand-computed one (the other queries are timed only)."""
    if sql == TINY and set(rows) != TINY_ANSWER:
        raise AssertionError(f"the 4-edge SSSP's answer {via} is wrong: {rows}")


def start(home: Path, server, poll: str):
    from tests.clients.superset import Superset, SupersetAPI

    app = Superset(home, poll=poll).set_up()
    try:
        api = SupersetAPI(app.start().url)
        return app, api, api.add_database("recsql", f"hive+recsql://analyst@127.0.0.1:{server.port}/analytics")
    except BaseException:
        app.stop()
        raise


def measure(homes: dict[str, Path], server, runs: int, warmup: int) -> dict[tuple[str, str], list[float]]:
    """Round trips of both queries through both Supersets and directly, interleaved."""
    from tests.clients.superset import POLL

    apps = {}
    try:
        for name, poll in (("default", ""), ("tuned", POLL)):
            apps[name] = start(homes[name], server, poll)
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(warmup + runs):
            for sql in QUERIES:
                order = ["default", "tuned", "direct"]
                for name in order if run % 2 == 0 else reversed(order):
                    seconds = direct(server, sql) if name == "direct" else sql_lab(apps[name][1], apps[name][2], sql)
                    if run >= warmup:
                        times.setdefault((name, sql), []).append(seconds)
        return times
    finally:
        for app, _, _ in apps.values():
            app.stop()


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks superset",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--out", default="benchmarks/SUPERSET.md")
    args = parser.parse_args(argv)

    from tests.clients import oracles
    from tests.clients.conftest import RecSQLServer
    from tests.clients.superset import POLL

    load_before = load()
    with tempfile.TemporaryDirectory(prefix="recsql-bench-superset-") as scratch:
        homes = {name: Path(scratch, name) for name in ("serve", "default", "tuned")}
        for home in homes.values():
            home.mkdir()
        server = RecSQLServer(homes["serve"]).start()
        try:
            connection, cursor = server.cursor()
            cursor.execute("CREATE DATABASE IF NOT EXISTS analytics")
            cursor.execute("CREATE TABLE analytics.edges (src INT, dst INT, cost INT) USING parquet")
            cursor.execute("INSERT INTO analytics.edges VALUES "
                           + ", ".join(f"({s}, {d}, {c})" for s, d, c in oracles.edges()))
            cursor.execute("CREATE TABLE analytics.tiny_edge (src INT, dst INT, cost INT) USING parquet")
            cursor.execute("INSERT INTO analytics.tiny_edge VALUES " + ", ".join(
                f"({line})" for line in TINY_EDGES.splitlines()[1:]))
            connection.close()
            times = measure(homes, server, args.runs, args.warmup)
        finally:
            server.stop()

    def row(sql: str) -> str:
        return " | ".join(summary(times[(name, sql)]) for name in ("default", "tuned", "direct"))

    text = f"""# Superset SQL Lab round trip against `recsql serve`

{chr(10).join(stamp(load_before))}
- apache-superset 6.1.0 (gunicorn, 1 worker, 4 threads, SQLite metadata database), database
  `hive+recsql://` (recsql's SQLAlchemy dialect, Superset's Hive engine spec); `recsql serve`
  on Spark `local[2]`, the dbt seed's 93 edges in `analytics.edges`, the 4 edges of
  `benchmarks/driverpath.py`'s SSSP in `analytics.tiny_edge` (both parquet tables)
- a round trip: one `POST /api/v1/sqllab/execute/` (synchronous), timed by the client; both
  Supersets run side by side against one server, and "PyHive" is the same query on a new
  PyHive connection without Superset (what Superset's engine does underneath); {args.warmup}
  untimed rounds, then {args.runs} rounds, each query through the three in alternating order;
  median (min-max), seconds

| query | Superset's default (polls every 5 s) | `{POLL}` | PyHive, no Superset |
|---|--:|--:|--:|
| the recursive query below | {row(QUERY)} |
| the 4-edge SSSP of `benchmarks/driverpath.py` (over a parquet table) | {row(TINY)} |
| `{TRIVIAL}` | {row(TRIVIAL)} |

```sql
{QUERY}
```
"""
    with open(args.out, "w") as stream:
        stream.write(text)
    print(text)
