"""The benchmark queries: recsql (RaSQL) text, which graphs they run on, and the oracle answer.

An answer is a set of tuples of Python ints, in the column order of the query's final SELECT.
Oracles use networkx up to ORACLE_NX_MAX_EDGES edges and scipy.sparse.csgraph above that.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .graphs import Graph

ORACLE_NX_MAX_EDGES = 1_000_000


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    template: str            # recsql SQL; {source} is the graph's start vertex
    needs_symmetric: bool = False
    needs_acyclic: bool = False

    def sql(self, g: Graph) -> str:
        return self.template.format(source=g.source)


QUERIES = {q.name: q for q in [
    Query("sssp", "single-source shortest paths (min)",
          "WITH recursive path (Dst, min() AS Cost) AS (SELECT {source}, 0) UNION "
          "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) "
          "SELECT Dst, Cost FROM path"),
    Query("cc", "connected components, label = least vertex id (min), symmetric graph",
          "WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM edge) UNION "
          "(SELECT edge.Dst, cc.C FROM cc, edge WHERE cc.X = edge.Src) SELECT X, C FROM cc",
          needs_symmetric=True),
    Query("reach", "reachability from one vertex (set)",
          "WITH recursive reach (X) AS (SELECT {source}) UNION "
          "(SELECT edge.Dst FROM reach, edge WHERE reach.X = edge.Src) SELECT X FROM reach"),
    Query("tc", "transitive closure (set of pairs)",
          "WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION "
          "(SELECT tc.A, edge.Dst FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc"),
    Query("cpaths", "number of paths from one vertex, DAG only (count)",
          "WITH recursive cpaths (Dst, count() AS Cnt) AS (SELECT {source}, 1) UNION "
          "(SELECT edge.Dst, cpaths.Cnt FROM cpaths, edge WHERE cpaths.Dst = edge.Src) "
          "SELECT Dst, Cnt FROM cpaths", needs_acyclic=True),
    Query("apsp", "all-pairs shortest paths (min), small graphs",
          "WITH recursive apsp (A, B, min() AS C) AS (SELECT Src, Dst, Cost FROM edge) UNION "
          "(SELECT apsp.A, edge.Dst, apsp.C + edge.Cost FROM apsp, edge WHERE apsp.B = edge.Src) "
          "SELECT A, B, C FROM apsp"),
]}

# which graphs each query runs on (full suite); CC runs on the symmetric version of its graphs
# (query, graph) in the order the full suite runs them: the target cases first, so an
# interrupted run still holds the figures that matter most
FULL_PLAN = [
    ("sssp", "rmat-16"), ("sssp", "soc-Epinions1"), ("cc", "rmat-16"), ("cc", "soc-Epinions1"),
    ("reach", "road-USA-NY"),
    ("reach", "bintree-down-12"), ("reach", "bowtie-2000x50"), ("tc", "bintree-up-12"),
    ("cpaths", "bowtie-2000x50"),
    ("sssp", "rmat-18"), ("sssp", "web-NotreDame"), ("tc", "rmat-8"), ("apsp", "rmat-8"),
    ("sssp", "rmat-12"), ("sssp", "rmat-14"), ("reach", "grid-60"), ("cc", "rmat-18"),
]
QUICK_PLAN = [
    ("sssp", "rmat-12"), ("sssp", "rmat-14"), ("sssp", "soc-Epinions1"), ("cc", "rmat-12"),
    ("reach", "grid-60"), ("reach", "bowtie-2000x50"),
]


# ---------------------------------------------------------------- oracles
def _nx(g: Graph):
    import networkx as nx

    G = nx.DiGraph()
    G.add_weighted_edges_from(zip(g.src.tolist(), g.dst.tolist(), g.w.tolist()), weight="w")
    return G


def _csr(g: Graph):
    import scipy.sparse as sp

    return sp.csr_matrix((g.w.astype(np.float64), (g.src, g.dst)), shape=(g.n, g.n))


def oracle_sssp(g: Graph) -> set:
    if g.m <= ORACLE_NX_MAX_EDGES:
        import networkx as nx

        d = nx.single_source_dijkstra_path_length(_nx(g), g.source, weight="w")
        return {(int(v), int(c)) for v, c in d.items()}
    from scipy.sparse.csgraph import dijkstra

    d = dijkstra(_csr(g), indices=g.source)
    ok = np.isfinite(d)
    return set(zip(np.nonzero(ok)[0].tolist(), d[ok].astype(np.int64).tolist()))


def oracle_reach(g: Graph) -> set:
    if g.m <= ORACLE_NX_MAX_EDGES:
        import networkx as nx

        return {(int(v),) for v in nx.descendants(_nx(g), g.source) | {g.source}}
    from scipy.sparse.csgraph import breadth_first_order

    return {(int(v),) for v in breadth_first_order(_csr(g), g.source, return_predecessors=False)}


def oracle_cc(g: Graph) -> set:
    verts = np.union1d(g.src, g.dst)
    if g.m <= ORACLE_NX_MAX_EDGES:
        import networkx as nx

        out = set()
        for comp in nx.weakly_connected_components(_nx(g)):
            low = min(comp)
            out |= {(int(v), int(low)) for v in comp}
        return out
    from scipy.sparse.csgraph import connected_components

    _, lab = connected_components(_csr(g), directed=True, connection="weak")
    low = np.full(lab.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(low, lab[verts], verts)
    return set(zip(verts.tolist(), low[lab[verts]].tolist()))


def oracle_tc(g: Graph) -> set:
    import networkx as nx

    G = _nx(g)
    out = set()
    for a in G.nodes:
        desc = nx.descendants(G, a)
        out |= {(a, b) for b in desc}
        if any(u in desc for u in G.predecessors(a)):  # a lies on a cycle
            out.add((a, a))
    return {(int(a), int(b)) for a, b in out}


def oracle_apsp(g: Graph) -> set:
    import networkx as nx

    G = _nx(g)
    out = set()
    for a, dist in nx.all_pairs_dijkstra_path_length(G, weight="w"):
        out |= {(a, b, c) for b, c in dist.items() if b != a}
        back = [dist[u] + G[u][a]["w"] for u in G.predecessors(a) if u in dist]
        if back:  # shortest cycle through a
            out.add((a, a, min(back)))
    return {(int(a), int(b), int(c)) for a, b, c in out}


def oracle_cpaths(g: Graph) -> set:
    import networkx as nx

    G = _nx(g)
    reach = nx.descendants(G, g.source) | {g.source}
    cnt = {g.source: 1}
    for v in nx.topological_sort(G.subgraph(reach)):
        if v != g.source:
            cnt[v] = sum(cnt[u] for u in G.predecessors(v) if u in reach)
    return {(int(v), int(c)) for v, c in cnt.items()}


ORACLES: dict[str, Callable[[Graph], set]] = {
    "sssp": oracle_sssp, "reach": oracle_reach, "cc": oracle_cc,
    "tc": oracle_tc, "apsp": oracle_apsp, "cpaths": oracle_cpaths,
}


def graph_for(query: Query, graph_name: str) -> str:
    """The graph a query actually reads (CC reads the symmetric version)."""
    return graph_name + "-sym" if query.needs_symmetric else graph_name


def load_case(query_name: str, graph_name: str, spark):
    """(query, graph, oracle answer, edges) for a one-case benchmark: the edges cached in Spark
    and registered as the temp view `edge`."""
    from . import graphs

    q = QUERIES[query_name]
    g = graphs.load(graph_for(q, graph_name))
    oracle = ORACLES[q.name](g)
    edges = spark.read.parquet(str(g.parquet())).cache()
    edges.count()
    edges.createOrReplaceTempView("edge")
    return q, g, oracle, edges
