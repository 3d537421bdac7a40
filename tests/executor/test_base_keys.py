"""A base step over the partitioned copy's keys alone (`BaseRelation.keys_only`, the Spark loop's
base step binding `index.keys`): CC's `SELECT Src, Src FROM edge` reads one row per key of the
adjacency index, not one per edge. Exact only where the branch reads the partition columns alone,
row by row, into a relation that keeps no row's multiplicity (a min()/max() or set head); the
kinds where it must not apply (sum, UNION ALL, another column in SELECT or WHERE) are run too.
Every answer is checked against a plain-Python fixpoint, at default settings and on the Spark loop;
on the Spark loop the test also checks which statements bound the keys."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest

import recsql
from recsql.executor.strategies import index
from tests import oracles

SPARK_LOOP = {"spark.recsql.endgame.enabled": "false"}
# the two settings users meet: the defaults (the driver endgame may take the fixpoint), the Spark loop
MODES = pytest.mark.parametrize("conf", [{}, SPARK_LOOP], ids=["default", "spark loop"])


def _graph(n: int = 90, m: int = 300, seed: int = 7, dag: bool = False) -> list[tuple[int, int, int]]:
    """Directed edges (most sources with several), a cost each; from the lower id to the higher
    with `dag`."""
    rng = random.Random(seed)
    edges = {}
    for _ in range(m):
        s, d = rng.randrange(n), rng.randrange(n)
        if s != d:
            edges[(min(s, d), max(s, d)) if dag else (s, d)] = rng.randint(1, 20)
    return [(s, d, c) for (s, d), c in sorted(edges.items())]


@pytest.fixture
def keys_bound(monkeypatch):
    """Each call of `index.keys` this test: whether the copy had an index (one row per key)."""
    calls: list[bool] = []
    real = index.keys

    def spy(copy, columns):
        calls.append(copy.index is not None)
        return real(copy, columns)

    monkeypatch.setattr(index, "keys", spy)
    return calls


def _best_labels(base: dict[int, list[int]], edges, best=min) -> set[tuple[int, int]]:
    """(v, the best label of every base row (u, label) whose u reaches v, v included)."""
    labels: dict[int, int] = {}
    for u, values in base.items():
        for v in oracles.reachable(edges, u):
            labels[v] = best([labels[v], *values]) if v in labels else best(values)
    return set(labels.items())


def _base(edges, value, keep=lambda e: True) -> dict[int, list[int]]:
    rows = defaultdict(list)
    for edge in edges:
        if keep(edge):
            rows[edge[0]].append(value(edge))
    return rows


def _run(spark, query, conf):
    result = recsql.run(query, spark=spark, conf=conf)
    return result.df.collect()


CC = """WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM {t})
  UNION (SELECT e.Dst, cc.C FROM cc, {t} e WHERE cc.X = e.Src)
SELECT X, C FROM cc"""


@MODES
@pytest.mark.parametrize("best", [min, max])
def test_min_and_max_labels_over_the_keys_give_the_oracle_answer(spark, view, keys_bound, conf, best):
    edges = _graph()
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = CC.format(t="kedge").replace("min()", f"{best.__name__}()")
    expected = _best_labels(_base(edges, lambda e: e[0]), edges, best)
    for _ in range(2):  # the second statement reads the copy the first kept
        assert {tuple(r) for r in _run(spark, query, conf)} == expected
    if conf:
        assert keys_bound == [True, True]


@MODES
def test_a_set_relation_over_the_keys_with_a_key_filter_gives_the_oracle_answer(spark, view, keys_bound, conf):
    edges = _graph(seed=3)
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = """WITH recursive r (A, B) AS (SELECT DISTINCT k.Src, k.Src * 10 FROM kedge k WHERE k.Src % 3 = 0)
      UNION (SELECT e.Dst, r.B FROM r, kedge e WHERE r.A = e.Src)
    SELECT A, B FROM r"""
    expected = {(v, u * 10) for u in {s for s, _, _ in edges if s % 3 == 0}
                for v in oracles.reachable(edges, u)}
    assert {tuple(r) for r in _run(spark, query, conf)} == expected
    if conf:
        assert keys_bound == [True]


def test_a_copy_kept_without_its_index_answers_from_its_rows(spark, view, keys_bound):
    # the index off: the copy is flat, so the base step reads every row (the same answer)
    edges = _graph(seed=5)
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = _run(spark, CC.format(t="kedge"), {**SPARK_LOOP, "spark.recsql.index.enabled": "false"})
    assert {tuple(r) for r in result} == _best_labels(_base(edges, lambda e: e[0]), edges)
    assert keys_bound == [False]


@MODES
@pytest.mark.parametrize("anchor, value, keep", [
    # another column in SELECT: the label is the least out-neighbour
    ("SELECT Src, Dst FROM kedge", lambda e: e[1], lambda e: True),
    # another column in WHERE: only the expensive edges' sources start
    ("SELECT Src, Src FROM kedge WHERE Cost > 12", lambda e: e[0], lambda e: e[2] > 12),
], ids=["select", "where"])
def test_a_branch_reading_another_column_reads_every_row(spark, view, keys_bound, conf, anchor, value, keep):
    edges = _graph(seed=11)
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = CC.format(t="kedge").replace("SELECT Src, Src FROM kedge", anchor)
    assert {tuple(r) for r in _run(spark, query, conf)} == _best_labels(_base(edges, value, keep), edges)
    assert keys_bound == []


@MODES
def test_union_all_counts_every_row(spark, view, keys_bound, conf):
    # a walk starts at every edge: a source of three edges starts three walks
    edges = _graph(40, 90, seed=2)
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = """WITH recursive walk (X, D) AS (SELECT Src, 0 FROM kedge)
      UNION ALL (SELECT e.Dst, walk.D + 1 FROM walk, kedge e WHERE walk.X = e.Src AND walk.D < 2)
    SELECT X, D FROM walk"""
    succ = oracles.successors(edges)
    expected: Counter = Counter()
    level = Counter(s for s, _, _ in edges)
    for depth in range(3):
        expected.update({(x, depth): n for x, n in level.items()})
        following: Counter = Counter()
        for x, n in level.items():
            for y in succ[x]:
                following[y] += n
        level = following
    assert Counter(tuple(r) for r in _run(spark, query, conf)) == expected
    assert keys_bound == []


@MODES
def test_a_sum_reads_every_row(spark, view, keys_bound, conf):
    # each vertex with out-edges contributes its id (one contributor per distinct base row), and
    # every predecessor its total: on a DAG, a total over paths
    edges = _graph(60, 200, seed=4, dag=True)
    view("kedge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = """WITH recursive s (X, sum() AS N) AS (SELECT Src, Src FROM kedge)
      UNION (SELECT e.Dst, s.N FROM s, kedge e WHERE s.X = e.Src)
    SELECT X, N FROM s"""
    preds = defaultdict(set)
    for src, dst, _ in edges:
        preds[dst].add(src)
    sources = {src for src, _, _ in edges}
    totals: dict[int, int] = {}
    for v in sorted(sources | set(preds)):  # a DAG from lower ids to higher: predecessors first
        totals[v] = (v if v in sources else 0) + sum(totals[u] for u in preds[v])
    assert {tuple(r) for r in _run(spark, query, conf)} == set(totals.items())
    assert keys_bound == []
