"""Helpers of the server tests: the shared edge table, its oracle, PyHive connections."""

from __future__ import annotations

import contextlib
import random
import re
import time

# A small weighted digraph with a cycle, shared by every client session as the view `edge`
random.seed(11)
EDGES = sorted({(s, d, random.randint(1, 9)) for s in range(1, 31) for d in random.sample(range(1, 31), 3)
                if s != d})
EDGE_SCHEMA = "Src INT, Dst INT, Cost INT"

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""


def register_edges(session) -> None:
    session.createDataFrame(EDGES, EDGE_SCHEMA).createOrReplaceTempView("edge")


def sssp_oracle(source: int = 1) -> list[tuple[int, int]]:
    import networkx as nx

    graph = nx.DiGraph()
    for s, d, c in EDGES:
        if not graph.has_edge(s, d) or graph[s][d]["weight"] > c:
            graph.add_edge(s, d, weight=c)
    return sorted(nx.single_source_dijkstra_path_length(graph, source).items())


def connect(server, **kwargs):
    from pyhive import hive

    kwargs.setdefault("auth", "NOSASL")
    return hive.Connection(host="127.0.0.1", port=server.port, username="analyst", **kwargs)


@contextlib.contextmanager
def cursor(server, **kwargs):
    connection = connect(server, **kwargs)
    try:
        with contextlib.closing(connection.cursor()) as cur:
            yield cur
    finally:
        connection.close()


def beeline(url: str, script: str, *args: str, user: str = "analyst", password: str = "secret",
            timeout: float = 180) -> str:
    """Run `script` with the Hive JDBC client pyspark ships (bin/beeline); its stdout. (Its
    launcher splits arguments at spaces: no spaces in the password.)"""
    import os
    import subprocess
    import tempfile

    import pyspark

    binary = os.path.join(os.path.dirname(pyspark.__file__), "bin", "beeline")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as stream:
        stream.write(script)
    try:
        done = subprocess.run(
            [binary, "-u", url, "-n", user, "-p", password, "--outputformat=csv2",
             "--silent=true", "--showHeader=true", *args, "-f", stream.name],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        os.unlink(stream.name)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def output_lines(text: str) -> list[str]:
    """beeline's stdout lines. (With --silent=true beeline 2.3 writes its empty in-place progress
    as `null` in front of a line; that noise is dropped.)"""
    return [re.sub(r"^(null\s*)+", "", line.strip()).strip() for line in text.splitlines()]


def csv_rows(text: str, header: str) -> list[tuple]:
    """The rows after `header` in beeline's csv2 output, up to the next blank line or header."""
    lines = output_lines(text)
    start = next(i for i, line in enumerate(lines) if line == header) + 1
    rows = []
    for line in lines[start:]:
        if not line or not line[0].isdigit():
            break
        rows.append(tuple(int(v) for v in line.split(",")))
    return sorted(rows)


def wait_for(predicate, seconds: float, step: float = 0.05):
    """The first truthy value of `predicate()`, polled for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {seconds} s")
