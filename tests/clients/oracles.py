"""Answers computed from the dbt seed's CSV with networkx: the clients' oracles."""

from __future__ import annotations

import csv
from pathlib import Path

SEED = Path(__file__).parent / "dbt_project" / "seeds" / "edges.csv"
SOURCE = 1


def edges() -> list[tuple[int, int, int]]:
    with open(SEED) as stream:
        return [(int(r["src"]), int(r["dst"]), int(r["cost"])) for r in csv.DictReader(stream)]


def graph():
    import networkx as nx

    g = nx.DiGraph()
    g.add_weighted_edges_from(edges())  # the seed has one edge per (src, dst)
    return g


def shortest_paths() -> list[tuple[int, int]]:
    import networkx as nx

    return sorted(nx.single_source_dijkstra_path_length(graph(), SOURCE).items())


def hops() -> list[tuple[int, int]]:
    import networkx as nx

    return sorted(nx.single_source_shortest_path_length(graph(), SOURCE).items())


def reachable() -> list[tuple[int]]:
    return [(node,) for node, _ in hops()]
