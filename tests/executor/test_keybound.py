"""Candidates that cannot change a min()/max() CTE, dropped before their aggregate
(`planner/keybound.py`, `executor/strategies/keybound.py`): CC's candidate `(Dst, C)` with
`C >= Dst`, where every `Dst` is also a `Src`, a fact learnt from an earlier statement's first
iteration over the same kept copy. Every answer is checked against an independent oracle
(networkx's components, or a plain-Python fixpoint), at default settings and on the Spark loop;
on the Spark loop the tests also check which statements filtered. The cases where dropping would
be wrong (a `Dst` that is no `Src`, whose group only candidates make; a table changed between
statements) are run too."""

from __future__ import annotations

import random

import networkx as nx
import pytest

import recsql
from recsql.executor.strategies import keybound
from tests import oracles

SPARK_LOOP = {"spark.recsql.endgame.enabled": "false"}
MODES = pytest.mark.parametrize("conf", [{}, SPARK_LOOP], ids=["default", "spark loop"])

CC = """WITH recursive cc (X, {best}() AS C) AS (SELECT Src, Src FROM {t})
  UNION (SELECT e.Dst, cc.C FROM cc, {t} e WHERE cc.X = e.Src{more})
SELECT X, C FROM cc"""


def cc(best: str = "min", more: str = "") -> str:
    return CC.format(best=best, t="bedge", more=more)


@pytest.fixture
def filtered(monkeypatch):
    """How many candidate sets the key bound filtered this test."""
    calls: list[int] = []
    real = keybound.may_change

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(keybound, "may_change", spy)
    return calls


@pytest.fixture
def cached(spark, view):
    """`cached(rows, schema)`: the view `bedge`, cached, so that statements over it keep their
    base copy (and what they learnt of it) for the next."""
    frames = []

    def make(rows, schema="Src BIGINT, Dst BIGINT, Cost BIGINT"):
        df = view("bedge", rows, schema).cache()
        frames.append(df)
        return df

    yield make
    for df in frames:
        df.unpersist()


def _symmetric(n: int = 120, m: int = 160, seed: int = 5) -> list[tuple[int, int, int]]:
    """An undirected graph of several components, as both directed edges, a cost each."""
    rng = random.Random(seed)
    pairs = {(a, b) for a, b in ((rng.randrange(n), rng.randrange(n)) for _ in range(m)) if a != b}
    return sorted({(a, b, 1) for a, b in pairs} | {(b, a, 1) for a, b in pairs})


def _components(edges, best=min) -> set[tuple[int, int]]:
    """networkx's connected components: each vertex with its component's least (greatest) id."""
    g = nx.Graph()
    g.add_edges_from((s, d) for s, d, _ in edges)
    return {(v, best(c)) for c in nx.connected_components(g) for v in c}


def _labels(edges, best=min, kept=lambda edge: True) -> set[tuple[int, int]]:
    """A plain-Python fixpoint of the query on directed edges: every vertex with an out-edge
    starts with its own id; a vertex takes the best label of any vertex that reaches it along
    the edges `kept`."""
    labels = {s: s for s, _, _ in edges}
    followed = [e for e in edges if kept(e)]
    for u in {s for s, _, _ in edges}:
        for v in oracles.reachable(followed, u):
            labels[v] = best(labels[v], u) if v in labels else u
    return set(labels.items())


def _run(spark, query, conf):
    return {tuple(r) for r in recsql.run(query, spark=spark, conf=conf).df.collect()}


@MODES
@pytest.mark.parametrize("best", [min, max])
def test_cc_on_a_symmetric_graph_drops_candidates_once_learnt(spark, cached, filtered, conf, best):
    edges = _symmetric()
    cached(edges)
    query = cc(best.__name__)
    assert _run(spark, query, conf) == _components(edges, best)
    assert not filtered  # the first statement over the copy learns the fact; it filters nothing
    for _ in range(2):  # later ones read the copy, and the fact, the first kept
        assert _run(spark, query, conf) == _components(edges, best)
    if conf:
        assert len(filtered) == 2


@MODES
def test_a_destination_that_is_no_source_keeps_its_candidates(spark, cached, filtered, conf):
    # 1009 -> 1002 and 1008 -> 1002, where 1002 has no out-edge: group 1002 is made only by
    # candidates (1008 and 1009), every one of them above 1002; dropping them would lose it
    edges = [*_symmetric(30, 40, seed=2), (1009, 1002, 1), (1008, 1002, 1), (1008, 3, 1)]
    cached(edges)
    for _ in range(3):
        assert _run(spark, cc(), conf) == _labels(edges)
    assert not filtered


def test_a_changed_table_is_learnt_again(spark, cached, filtered):
    # the fact "every Dst is a Src" belongs to the copy: a changed table makes a new copy
    edges = _symmetric(40, 60, seed=9)
    cached(edges)
    for _ in range(2):
        assert _run(spark, cc(), SPARK_LOOP) == _components(edges)
    assert len(filtered) == 1
    filtered.clear()
    changed = [*edges, (45, 1, 1), (44, 41, 1)]  # 1 and 41: destinations of larger sources
    cached(changed)
    for _ in range(2):
        assert _run(spark, cc(), SPARK_LOOP) == _labels(changed)
    assert not filtered


def test_a_filtered_branch_uses_the_fact_but_does_not_teach_it(spark, cached, filtered):
    # `AND e.Cost > 1` makes no candidate for some rows, so its first iteration's groups say
    # nothing of every Dst; the plain query's do, and the filtered one may then use them
    edges = [(s, d, 1 + (s * 7 + d) % 3) for s, d, _ in _symmetric(60, 90, seed=3)]
    cached(edges)
    heavy = cc(more=" AND e.Cost > 1")
    expected = _labels(edges, kept=lambda e: e[2] > 1)
    for _ in range(2):
        assert _run(spark, heavy, SPARK_LOOP) == expected
    assert not filtered
    assert _run(spark, cc(), SPARK_LOOP) == _components(edges)
    assert not filtered
    assert _run(spark, heavy, SPARK_LOOP) == expected
    assert len(filtered) == 1


@MODES
def test_other_types_of_key_and_label_are_left_alone(spark, cached, filtered, conf):
    # a Dst of another type than Src: the comparison would not be the merge's
    edges = _symmetric(40, 60, seed=4)
    cached(edges, "Src INT, Dst BIGINT, Cost BIGINT")
    for _ in range(2):
        assert _run(spark, cc(), conf) == _components(edges)
    assert not filtered
