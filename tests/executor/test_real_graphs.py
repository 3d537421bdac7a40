"""Real graphs (tests/data/graphs/, SNAP) against scipy.sparse.csgraph."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from conftest import rows
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components, shortest_path

import recsql


def load(spark, data_dir, name, view):
    path = data_dir / "graphs" / f"{name}.tsv.gz"
    df = (spark.read.option("sep", "\t").option("comment", "#")
          .schema("Src INT, Dst INT").csv(str(path)))
    df.createOrReplaceTempView(view)
    with gzip.open(path, "rt") as f:
        edges = np.array([list(map(int, line.split()[:2])) for line in f if not line.startswith("#")])
    n = int(edges.max()) + 1
    matrix = csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return edges, matrix


@pytest.fixture
def dropping(spark):
    names = []
    yield names
    for name in names:
        spark.catalog.dropTempView(name)


def test_email_eu_core_sssp_unit_costs(spark, data_dir, dropping):
    dropping.append("eu")
    edges, matrix = load(spark, data_dir, "email-Eu-core", "eu")
    source = int(edges[0, 0])
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT :src, 0)
             UNION (SELECT eu.Dst, path.Cost + 1 FROM path, eu WHERE path.Dst = eu.Src)
           SELECT Dst, Cost FROM path"""
    got = rows(recsql.sql(q, args={"src": source}, spark=spark))
    dist = shortest_path(matrix, directed=True, unweighted=True, indices=source)
    expected = sorted((int(v), int(d)) for v, d in enumerate(dist) if np.isfinite(d))
    assert len(expected) > 500
    assert got == expected


def test_p2p_gnutella08_reachability(spark, data_dir, dropping):
    dropping.append("gnut")
    edges, matrix = load(spark, data_dir, "p2p-Gnutella08", "gnut")
    q = """WITH RECURSIVE reach (X) AS (SELECT 0 UNION SELECT gnut.Dst FROM reach JOIN gnut ON reach.X = gnut.Src)
           SELECT X FROM reach"""
    got = {r[0] for r in recsql.sql(q, spark=spark).collect()}
    expected = set(int(v) for v in breadth_first_order(matrix, 0, directed=True, return_predecessors=False))
    assert len(expected) > 1000
    assert got == expected


def test_ca_grqc_connected_components(spark, data_dir, dropping):
    dropping.append("grqc")
    edges, matrix = load(spark, data_dir, "ca-GrQc", "grqc")  # stored in both directions
    q = """WITH recursive cc (Node, min() AS Comp) AS (SELECT Src, Src FROM grqc)
             UNION (SELECT grqc.Dst, cc.Comp FROM cc, grqc WHERE cc.Node = grqc.Src)
           SELECT count(*) AS nodes, count(DISTINCT Comp) AS comps, sum(Comp) AS s FROM cc"""
    _, labels = connected_components(matrix, directed=False)
    present = np.unique(edges)
    smallest = {}
    for v in present:
        smallest.setdefault(labels[v], int(v))  # present is sorted: first seen is the minimum
    expected_sum = sum(smallest[labels[v]] for v in present)
    assert rows(recsql.sql(q, spark=spark)) == [(len(present), len(smallest), expected_sum)]
