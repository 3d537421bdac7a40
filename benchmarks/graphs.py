"""Benchmark graphs: deterministic generators, real graphs, parquet files for Spark/DuckDB.

Every graph is a deduplicated edge list without self loops, with positive integer weights.
Vertex ids are non-negative integers; `Graph.source` is the start vertex of single-source queries.
"""
from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "out"
REAL_DIR = Path(os.environ.get("RECSQL_GRAPHS", "/work/shared/data/graphs"))
SEED = 20240611
FORMAT_VERSION = 1  # bump when a generator changes, so stale parquet files are rebuilt


@dataclass
class Graph:
    name: str
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    acyclic: bool
    source: int
    description: str
    symmetric: bool = False
    _path: Path | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Size of a dense id space covering every vertex (max id + 1)."""
        return int(max(self.src.max(initial=0), self.dst.max(initial=0))) + 1

    @property
    def m(self) -> int:
        return len(self.src)

    def parquet(self) -> Path:
        """Write (once) and return the parquet file with columns Src, Dst, Cost (BIGINT)."""
        if self._path is None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            OUT.mkdir(parents=True, exist_ok=True)
            path = OUT / f"{self.name}.v{FORMAT_VERSION}.parquet"
            if not path.exists():
                table = pa.table({"Src": self.src, "Dst": self.dst, "Cost": self.w})
                tmp = path.with_suffix(".tmp")
                pq.write_table(table, tmp)
                tmp.rename(path)
            self._path = path
        return self._path

    def made_symmetric(self) -> Graph:
        """Both directions of every edge (for connected components)."""
        if self.symmetric:
            return self
        s = np.concatenate([self.src, self.dst])
        d = np.concatenate([self.dst, self.src])
        w = np.concatenate([self.w, self.w])
        s, d, w = _dedupe(s, d, w)
        return Graph(f"{self.name}-sym", s, d, w, False, self.source,
                     self.description + ", made symmetric", symmetric=True)


def _dedupe(src, dst, w):
    """Drop self loops and duplicate (src, dst) pairs, keeping the first weight."""
    keep = src != dst
    src, dst, w = src[keep], dst[keep], w[keep]
    key = src.astype(np.int64) * (int(max(src.max(initial=0), dst.max(initial=0))) + 1) + dst
    _, first = np.unique(key, return_index=True)
    first.sort()
    return (src[first].astype(np.int64), dst[first].astype(np.int64), w[first].astype(np.int64))


def _weights(rng, m):
    return rng.integers(1, 101, size=m, dtype=np.int64)


def rmat(scale: int, edge_factor: int = 16, a=0.57, b=0.19, c=0.19, seed: int = SEED,
         source: int = 1) -> Graph:
    """Recursive-matrix (R-MAT) power-law graph with 2^scale vertices, ids 0..2^scale-1 (another
    seed than the suite's is named after it: `rmat-20-seed7`)."""
    rng = np.random.default_rng([seed, scale])
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(m)
        # quadrants: a = (0,0), b = (0,1), c = (1,0), d = (1,1)
        src |= (r >= a + b).astype(np.int64) << bit
        dst |= (((r >= a) & (r < a + b)) | (r >= a + b + c)).astype(np.int64) << bit
    w = _weights(rng, m)
    s, d, w = _dedupe(src, dst, w)
    name = f"rmat-{scale}" if seed == SEED else f"rmat-{scale}-seed{seed}"
    return Graph(name, s, d, w, False, source,
                 f"R-MAT 2^{scale} vertices, {edge_factor} edges/vertex before dedupe, "
                 f"a={a} b={b} c={c}, seed {seed}" + (f", source {source}" if source != 1 else ""))


def grid(side: int = 60, seed: int = SEED) -> Graph:
    """side x side grid, edges in both directions, ids 1..side^2 row-major (1 = a corner)."""
    rng = np.random.default_rng([seed, side, 1])
    ids = np.arange(1, side * side + 1, dtype=np.int64).reshape(side, side)
    right = (ids[:, :-1].ravel(), ids[:, 1:].ravel())
    down = (ids[:-1, :].ravel(), ids[1:, :].ravel())
    s = np.concatenate([right[0], down[0]])
    d = np.concatenate([right[1], down[1]])
    w = _weights(rng, len(s))
    s, d, w = _dedupe(np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([w, w]))
    return Graph(f"grid-{side}", s, d, w, False, 1,
                 f"{side}x{side} grid, both directions, weights 1..100")


def bintree(depth: int = 12, up: bool = False, seed: int = SEED) -> Graph:
    """Complete binary tree, heap numbering (root 1, children 2i and 2i+1), depth levels below root."""
    rng = np.random.default_rng([seed, depth, 2])
    child = np.arange(2, 2 ** (depth + 1), dtype=np.int64)
    parent = child // 2
    w = _weights(rng, len(child))
    if up:
        leaf = 2 ** depth  # leftmost leaf
        return Graph(f"bintree-up-{depth}", child, parent, w, True, int(leaf),
                     f"complete binary tree of depth {depth} ({len(child) + 1} vertices), "
                     f"edges child->parent, source = leftmost leaf {leaf}")
    return Graph(f"bintree-down-{depth}", parent, child, w, True, 1,
                 f"complete binary tree of depth {depth} ({len(child) + 1} vertices), "
                 f"edges parent->child, source = root 1")


def bowtie(width: int = 2000, length: int = 50, seed: int = SEED) -> Graph:
    """1 -> width fan vertices -> chain of `length` vertices -> width fan vertices (a DAG)."""
    rng = np.random.default_rng([seed, width, length])
    left = np.arange(2, 2 + width, dtype=np.int64)
    chain = np.arange(2 + width, 2 + width + length, dtype=np.int64)
    right = np.arange(chain[-1] + 1, chain[-1] + 1 + width, dtype=np.int64)
    s = np.concatenate([np.ones(width, np.int64), left, chain[:-1], np.full(width, chain[-1])])
    d = np.concatenate([left, np.full(width, chain[0]), chain[1:], right])
    w = _weights(rng, len(s))
    return Graph(f"bowtie-{width}x{length}", *_dedupe(s, d, w), True, 1,
                 f"bowtie: 1 -> {width} vertices -> chain of {length} -> {width} vertices")


def real(dataset: str, symmetric: bool = False, seed: int = SEED) -> Graph:
    """A graph from /work/shared/data/graphs/<dataset>.tsv.gz (see the README there).

    Unweighted files get seeded weights 1..100. `symmetric` adds the reverse of every edge
    (for undirected graphs stored once)."""
    path = REAL_DIR / f"{dataset}.tsv.gz"
    import pandas as pd

    with gzip.open(path, "rt") as fh:
        df = pd.read_csv(fh, sep="\t", comment="#", header=None)
    s = df[0].to_numpy(np.int64)
    d = df[1].to_numpy(np.int64)
    rng = np.random.default_rng([seed, len(s)])
    w = _weights(rng, len(s))
    if symmetric:
        s, d, w = np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([w, w])
    s, d, w = _dedupe(s, d, w)
    return Graph(dataset, s, d, w, False, 1,
                 f"{dataset} ({path.name}), self loops and duplicates dropped, seeded weights 1..100"
                 + (", both directions" if symmetric else ""), symmetric=symmetric)


# name -> builder; names are what --graphs accepts
BUILDERS = {
    "rmat-8": lambda: rmat(8),
    "rmat-12": lambda: rmat(12),
    "rmat-14": lambda: rmat(14),
    "rmat-16": lambda: rmat(16),
    "rmat-18": lambda: rmat(18),
    "rmat-20": lambda: rmat(20),  # 16.1M edges; run on its own (minutes)
    "rmat-20-seed7": lambda: rmat(20, seed=7, source=0),  # a second 2^20 graph, another source
    "rmat-22": lambda: rmat(22),  # 67M edges before dedupe; SSSP only, run on its own (many minutes)
    "grid-60": lambda: grid(60),
    "bintree-down-12": lambda: bintree(12, up=False),
    "bintree-up-12": lambda: bintree(12, up=True),
    "bowtie-2000x50": lambda: bowtie(2000, 50),
    "soc-Epinions1": lambda: real("soc-Epinions1"),
    "web-NotreDame": lambda: real("web-NotreDame"),
    "road-USA-NY": lambda: real("road-USA-NY-unweighted", symmetric=True),
}

_cache: dict[str, Graph] = {}


def load(name: str) -> Graph:
    if name not in _cache:
        if name.endswith("-sym"):
            _cache[name] = load(name[: -len("-sym")]).made_symmetric()
        else:
            _cache[name] = BUILDERS[name]()
    return _cache[name]
