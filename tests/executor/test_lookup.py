"""Key lookup (recsql/executor/strategies/lookup.py): a tiny delta reads only the base rows it joins. Answers
are checked against plain-Python oracles; the statistics say which iterations looked up."""

from __future__ import annotations

import random

import pytest
from conftest import setting

import recsql
from recsql.executor.strategies.lookup import MAX_KEYS
from tests import oracles

# The Spark loop (the `spark_loop` fixture); the lookup is on by default, and serves a branch the
# adjacency index (on by default, index.py) does not run: here, every branch (`index_off`)
pytestmark = pytest.mark.usefixtures("spark_loop", "index_off")

INDEX = "spark.recsql.index.enabled"


@pytest.fixture
def index_off(spark):
    with setting(spark, INDEX, "false"):
        yield

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""


def _rows(result) -> list[tuple]:
    return sorted(tuple(r) for r in result.df.collect())


def _looked_up(result) -> list[int]:
    """The iterations that ran a key lookup."""
    return [s.iteration for s in result.stats if s.lookup]


def _chain_and_fan(n: int = 60) -> list[tuple[int, int, int]]:
    """A fan-out of `n` edges from vertex 1 (a delta too large to look up) and a long chain
    with random cross edges (tiny deltas), with weights that make later paths shorter."""
    rng = random.Random(7)
    edges = [(1, 100 + k, 50 + k) for k in range(n)]
    edges += [(100 + k, 200 + k, 1) for k in range(n)]
    edges += [(200 + k, 201 + k, rng.randint(1, 3)) for k in range(n)]
    edges += [(rng.randrange(200, 200 + n), rng.randrange(200, 200 + n), rng.randint(1, 9)) for _ in range(n)]
    return edges


def test_tiny_deltas_are_looked_up_and_give_the_oracle_answer(spark, view):
    edges = _chain_and_fan()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP, spark=spark)
    assert _rows(result) == sorted(oracles.dijkstra(edges, 1).items())
    deltas_read = {s.iteration + 1: s.delta_rows for s in result.stats}
    looked = _looked_up(result)
    assert looked, "a tiny delta was looked up"
    assert all(deltas_read[i] <= MAX_KEYS for i in looked)
    assert any(rows > MAX_KEYS for i, rows in deltas_read.items() if i not in looked and i in deltas_read)


@pytest.mark.parametrize("read_by", ["lookup", "index"])
def test_string_and_two_column_keys_with_nulls(spark, view, read_by):
    # vertices are (region, id) pairs; a NULL part joins nothing, in the base and in the delta;
    # read by the key lookup, or (index on) by the adjacency index grouped by both parts
    edges = [("eu", 1, "eu", 2), ("eu", 2, "us", 1), ("us", 1, "us", 2), ("us", 2, "eu", 1),
             ("us", 2, None, 3), (None, 3, "eu", 9), ("eu", 2, "日本", 5), ("日本", 5, "eu", 1),
             ("é", 1, "eu", 2)] + [("x", k, "y", k) for k in range(40)]
    view("edge", edges, "Sr STRING, Si INT, Dr STRING, Di INT")
    query = """WITH recursive reach (R, I) AS (SELECT 'eu', 1)
      UNION (SELECT edge.Dr, edge.Di FROM reach, edge WHERE reach.R = edge.Sr AND reach.I = edge.Si)
    SELECT R, I FROM reach"""
    result = recsql.run(query, spark=spark, conf={INDEX: str(read_by == "index").lower()})
    pairs = [((sr, si), (dr, di)) for sr, si, dr, di in edges if None not in (sr, si)]
    expected = oracles.reachable(pairs, ("eu", 1)) | {("eu", 1)}
    assert {tuple(r) for r in result.df.collect()} == expected
    indexed = [s.iteration for s in result.stats if s.index]
    if read_by == "lookup":
        assert _looked_up(result) and not indexed
    else:  # the index filtered by the tiny deltas' keys, as the lookup filters a flat copy
        assert indexed and set(_looked_up(result)) <= set(indexed)


def test_keys_of_another_type_than_the_base_are_not_looked_up(spark, view):
    # the delta's INT key against a STRING column: the join casts, a literal list would not
    view("edge", [("1", 2, 5), ("2", 3, 1), ("02", 4, 1)], "Src STRING, Dst INT, Cost INT")
    query = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
      UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
    SELECT Dst, Cost FROM path"""
    result = recsql.run(query, spark=spark)
    # Spark compares '02' = 2 as numbers, so vertex 2 reaches 4 through '02' as well
    assert _rows(result) == [(1, 0), (2, 5), (3, 6), (4, 6)]
    assert not _looked_up(result)


def test_lookup_off_gives_the_same_oracle_answer_without_lookups(spark, view):
    edges = _chain_and_fan()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP, spark=spark, conf={"spark.recsql.lookup.enabled": "false"})
    assert _rows(result) == sorted(oracles.dijkstra(edges, 1).items())
    assert not _looked_up(result)


def test_a_delta_made_in_slices_is_not_looked_up_with_stale_keys(spark, view):
    # a fan of 25 edges, then layers of 25 parallel edges: every iteration reads at most 25 rows
    # (its keys observed when the action that made it ran whole), and joins 25 > 20 edges, so it
    # runs in slices, merged apart from that action; an iteration after one in slices must not
    # filter the base by the keys of an older delta (the next layer would be lost)
    fan = 25
    edges = [(1, 2, 1), (2, 3, 1)] + [(3, 100 + k, 1) for k in range(fan)]
    edges += [(layer + k, layer + 100 + k, 1) for layer in (100, 200, 300) for k in range(fan)]
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP, spark=spark, conf={"spark.recsql.rollover.maxRows": "20"})
    assert _rows(result) == sorted(oracles.dijkstra(edges, 1).items())
    after_slices = {s.iteration + 1 for s in result.stats if s.slices > 1 and 0 < s.delta_rows <= MAX_KEYS}
    assert after_slices, "a tiny delta made in slices was read"
    assert not after_slices & set(_looked_up(result))


def test_count_of_paths_looks_up_through_the_contributor_state(spark, view):
    # count() keeps contributors; its delta flag is not the min/max state's
    dag = [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (4, 6), (5, 7), (6, 7), (1, 7), (2, 5), (8, 9)]
    view("rc", dag, "A BIGINT, B BIGINT")
    query = """WITH recursive paths (X, count() AS Cnt) AS (SELECT 1, 1)
      UNION (SELECT rc.B, paths.Cnt FROM paths, rc WHERE paths.X = rc.A)
    SELECT X, Cnt FROM paths"""
    result = recsql.run(query, spark=spark)
    assert _rows(result) == sorted(oracles.count_paths_dag(dag, 1).items())
    assert _looked_up(result)


def test_mutual_recursion_looks_up_each_cte_by_the_other_delta(spark, view):
    edges = [(1, 2), (2, 3), (3, 4), (4, 1), (3, 5), (5, 6), (6, 7), (7, 5), (8, 9)]
    view("edge", edges, "Src INT, Dst INT")
    query = """WITH recursive even (X) AS (SELECT 1)
      UNION (SELECT edge.Dst FROM odd, edge WHERE odd.X = edge.Src),
    odd (X) AS (SELECT edge.Dst FROM even, edge WHERE even.X = edge.Src)
    SELECT 'even' AS kind, X FROM even UNION ALL SELECT 'odd', X FROM odd"""
    result = recsql.run(query, spark=spark)
    ev, od = oracles.parity_reach(edges, 1)
    assert _rows(result) == sorted([("even", x) for x in ev] + [("odd", x) for x in od])
    assert {s.cte for s in result.stats if s.lookup} == {"even", "odd"}
