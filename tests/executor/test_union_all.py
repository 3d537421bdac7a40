"""UNION ALL (bag) recursion deeper than Spark's 100-level default: against a Python oracle and,
on acyclic data, against Spark's own WITH RECURSIVE (with its level limit raised)."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import rows

import recsql

DEPTH = 150
SHORTCUTS = (10, 60, 120)
LADDER = [(i, i + 1) for i in range(DEPTH)] + [(i, i + 2) for i in SHORTCUTS]

WALKS = """
WITH RECURSIVE walk (Node, Depth) AS (
  SELECT 0, 0
  UNION ALL
  SELECT ladder.Dst, walk.Depth + 1 FROM walk JOIN ladder ON walk.Node = ladder.Src
)
SELECT Node, Depth FROM walk"""


def walks_oracle(edges, start=0):
    """The bag of (node, depth) over every walk from start (an acyclic graph)."""
    succ = {}
    for s, d in edges:
        succ.setdefault(s, []).append(d)
    bag, level = Counter(), Counter({(start, 0): 1})
    while level:
        bag += level
        nxt = Counter()
        for (node, depth), n in level.items():
            for d in succ.get(node, ()):
                nxt[(d, depth + 1)] += n
        level = nxt
    return sorted(bag.elements())


@pytest.fixture(scope="module")
def ladder(spark):
    df = spark.createDataFrame(LADDER, "Src int, Dst int")
    df.createOrReplaceTempView("ladder")
    yield df
    spark.catalog.dropTempView("ladder")


@pytest.fixture(scope="module")
def recsql_walks(spark, ladder):
    return recsql.run(WALKS, spark=spark)


def test_deeper_than_100_levels_matches_python(recsql_walks):
    got = rows(recsql_walks.df)
    expected = walks_oracle(LADDER)
    assert max(d for _, d in expected) == DEPTH
    assert len(expected) > len(set(expected))  # duplicates are real (bag semantics)
    assert got == expected


def test_stats_report_every_level(recsql_walks):
    iterations = [s.iteration for s in recsql_walks.stats]
    assert max(iterations) >= DEPTH


def _native(spark, query):
    """Spark's own WITH RECURSIVE, with its 100-level default limit lifted for this call."""
    key = "spark.sql.cteRecursionLevelLimit"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "-1")
    try:
        return rows(spark.sql(query))
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


COUNTER = """
WITH RECURSIVE c (N, D, Tag) AS (
  SELECT 0, 0, 'start'
  UNION ALL
  SELECT N + 1, D + CASE WHEN N IN (10, 60, 120) THEN 2 ELSE 1 END, concat('n', CAST(N + 1 AS STRING))
  FROM c WHERE N < 150
)
SELECT N, D, Tag FROM c"""


def counter_by_hand() -> list[tuple]:
    d, expected = 0, [(0, 0, "start")]
    for n in range(150):
        d += 2 if n in (10, 60, 120) else 1
        expected.append((n + 1, d, f"n{n + 1}"))
    return sorted(expected)


def test_counter_deeper_than_100_levels(spark):
    assert rows(recsql.sql(COUNTER, spark=spark)) == counter_by_hand()


@pytest.mark.slow  # Spark's native recursion plans a level at a time: 35 s of the default suite
def test_counter_deeper_than_100_matches_spark_native(spark):
    assert rows(recsql.sql(COUNTER, spark=spark)) == _native(spark, COUNTER) == counter_by_hand()


@pytest.mark.slow  # Spark's native recursion re-runs a shuffle join per level: minutes
def test_walks_match_spark_native_recursive_cte(spark, ladder, recsql_walks):
    assert _native(spark, WALKS) == rows(recsql_walks.df)


def test_counter_150_steps(spark):
    q = """WITH RECURSIVE c (N, D) AS (SELECT 0, 0 UNION ALL SELECT N + 1, D + 2 FROM c WHERE N < 150)
           SELECT count(*), max(N), sum(D) FROM c"""
    assert rows(recsql.sql(q, spark=spark)) == [(151, 150, sum(2 * i for i in range(151)))]
