"""Helpers of the server tests: the shared edge table, its oracle, PyHive connections."""

from __future__ import annotations

import contextlib
import random

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
