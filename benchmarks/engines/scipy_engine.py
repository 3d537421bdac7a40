"""scipy.sparse.csgraph (single-machine reference): Dijkstra, BFS, connected components.

The CSR matrix is built from the same edge arrays before timing. CC labels are mapped to the
least vertex id of each component (as the recsql query defines them). TC and APSP (small graphs)
use csgraph.shortest_path on the dense result; path counts have no csgraph routine.
"""
from __future__ import annotations

import numpy as np

from . import Engine, Outcome, Workload


class ScipyEngine(Engine):
    name = "scipy.csgraph"
    description = "scipy.sparse.csgraph in-process (dijkstra, breadth_first_order, connected_components)"

    def __init__(self):
        self.A = None

    def unavailable(self):
        try:
            import scipy.sparse.csgraph  # noqa: F401
        except ImportError as ex:
            return f"import scipy failed: {ex}"
        return None

    def cannot(self, w: Workload):
        if w.query.name == "cpaths":
            return "no csgraph routine counts paths"
        if w.query.name in ("tc", "apsp") and w.graph.n > 20_000:
            return "dense all-pairs matrix too large"
        return None

    def prepare(self, w: Workload):
        import scipy.sparse as sp

        g = w.graph
        self.A = sp.csr_matrix((g.w.astype(np.float64), (g.src, g.dst)), shape=(g.n, g.n))

    def run(self, w: Workload, deadline: float) -> Outcome:
        from scipy.sparse import csgraph as cg

        g, A, q = w.graph, self.A, w.query.name
        if q == "sssp":
            d = cg.dijkstra(A, indices=g.source)
            v = np.nonzero(np.isfinite(d))[0]
            ans = {"Dst": v, "Cost": d[v].astype(np.int64)}
        elif q == "reach":
            ans = {"X": cg.breadth_first_order(A, g.source, return_predecessors=False)}
        elif q == "cc":
            _, lab = cg.connected_components(A, directed=True, connection="weak")
            verts = np.union1d(g.src, g.dst)
            low = np.full(lab.max() + 1, np.iinfo(np.int64).max)
            np.minimum.at(low, lab[verts], verts)
            ans = {"X": verts, "C": low[lab[verts]]}
        else:  # tc / apsp: paths of length >= 1; (a, a) only through a cycle
            weighted = q == "apsp"
            D = cg.shortest_path(A, unweighted=not weighted)
            np.fill_diagonal(D, np.inf)
            # shortest cycle through a: min over in-edges (u, a) of D[a, u] + w(u, a)
            coo = A.tocoo()
            back = D[coo.col, coo.row] + (coo.data if weighted else 1)
            cyc = np.full(g.n, np.inf)
            np.minimum.at(cyc, coo.col, back)
            D[np.diag_indices(g.n)] = cyc
            a, b = np.nonzero(np.isfinite(D))
            ans = {"A": a, "B": b, "C": D[a, b].astype(np.int64)} if weighted else {"A": a, "B": b}
        return Outcome(answer=ans, ran_on="scipy (in-process)")

    def cleanup(self, w):
        self.A = None
