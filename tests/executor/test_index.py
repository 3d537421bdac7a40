"""Adjacency index (recsql/executor/index.py, `spark.recsql.index.enabled`): a delta holding a
small share of the base's join keys reads only their rows. Answers are checked against
plain-Python oracles; the statistics say which iterations read the index."""

from __future__ import annotations

import random

import pytest

import recsql
from recsql.executor import index
from tests import oracles
from tests.executor.test_placement import CC, EDGES, SSSP, SYMMETRIC, _merge_shuffles

pytestmark = pytest.mark.usefixtures("spark_loop")

ON = {"spark.recsql.index.enabled": "true", "spark.recsql.lookup.enabled": "false"}


@pytest.fixture
def index_on(spark):
    """The index on (and the key lookup off, so the index serves the tiny deltas too) for the
    duration of a test."""
    before = {k: spark.conf.get(k, None) for k in ON}
    for k, v in ON.items():
        spark.conf.set(k, v)
    yield
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def _graph(n: int = 400, m: int = 1600, seed: int = 11) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    edges = {(rng.randrange(n), rng.randrange(n)): rng.randint(1, 20) for _ in range(m)}
    return [(s, d, c) for (s, d), c in edges.items() if s != d]


def _index_reads(result) -> list[int]:
    return [s.iteration for s in result.stats if s.index]


@pytest.mark.usefixtures("index_on")
def test_sssp_reads_the_index_for_small_deltas_only_and_gives_the_oracle_answer(spark, view):
    edges = _graph()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP.replace("{t}", "edge").replace("SELECT 1, 0", "SELECT 0, 0"), spark=spark)
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(oracles.dijkstra(edges, 0).items())
    keys = len({s for s, _, _ in edges})
    deltas_read = {s.iteration + 1: s.delta_rows for s in result.stats}
    read = _index_reads(result)
    assert read, "a small delta read the index"
    assert all(deltas_read[i] <= index.SHARE * keys for i in read)
    assert any(rows > index.SHARE * keys for i, rows in deltas_read.items() if i not in read)


@pytest.mark.usefixtures("index_on")
def test_cc_with_the_index_gives_the_oracle_answer(spark, view):
    edges = _graph(300, 500, seed=5)
    both = sorted({(s, d, c) for s, d, c in edges} | {(d, s, c) for s, d, c in edges})
    view("edge", both, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(CC.replace("{t}", "edge"), spark=spark)
    assert {tuple(r) for r in result.df.collect()} == oracles.min_label_components([(s, d) for s, d, _ in both])
    assert _index_reads(result)


@pytest.mark.usefixtures("index_on")
def test_string_and_two_column_keys_with_nulls(spark, view):
    # a NULL key part joins nothing, in the base and in the delta; the index groups by both parts
    edges = [("eu", 1, "eu", 2), ("eu", 2, "us", 1), ("us", 1, "us", 2), ("us", 2, "eu", 1),
             ("us", 2, None, 3), (None, 3, "eu", 9), ("eu", 2, "日本", 5), ("日本", 5, "eu", 1),
             ("é", 1, "eu", 2)] + [("x", k, "y", k) for k in range(40)]
    view("edge", edges, "Sr STRING, Si INT, Dr STRING, Di INT")
    query = """WITH recursive reach (R, I) AS (SELECT 'eu', 1)
      UNION (SELECT edge.Dr, edge.Di FROM reach, edge WHERE reach.R = edge.Sr AND reach.I = edge.Si)
    SELECT R, I FROM reach"""
    result = recsql.run(query, spark=spark)
    pairs = [((sr, si), (dr, di)) for sr, si, dr, di in edges if None not in (sr, si)]
    assert {tuple(r) for r in result.df.collect()} == oracles.reachable(pairs, ("eu", 1)) | {("eu", 1)}
    assert _index_reads(result)


@pytest.mark.usefixtures("index_on")
@pytest.mark.parametrize("name", ["sssp", "cc"])
def test_an_iteration_reading_the_index_shuffles_only_its_candidates(spark, monkeypatch, capsys, name):
    # the index keeps the copy's partitioning, and its unnested rows keep it too
    table = f"index_{name}"
    edges = EDGES if name == "sssp" else SYMMETRIC
    spark.createDataFrame(edges, "Src INT, Dst INT, Cost INT").createOrReplaceTempView(table)
    try:
        query = (SSSP if name == "sssp" else CC).replace("{t}", table)
        answer, shuffles = _merge_shuffles(spark, monkeypatch, capsys, query)
    finally:
        spark.catalog.dropTempView(table)
    if name == "sssp":
        assert answer == sorted(oracles.dijkstra(EDGES, 1).items())
    else:
        assert answer == sorted(oracles.min_label_components([(s, d) for s, d, _ in SYMMETRIC]))
    assert shuffles and all(n == 1 for n in shuffles), shuffles
