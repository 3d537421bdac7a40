"""Adjacency index (recsql/executor/strategies/index.py, on by default): a branch that joins its delta with
one base table on the key runs in its direct form, the delta joined with the base copy grouped by
key, then unnested. Answers are checked against plain-Python oracles; the statistics say which
iterations read the index, and which read it filtered by a tiny delta's keys. Its placement (no
shuffle but the candidates') is tested in test_placement.py, its string and two-column keys in test_lookup.py."""

from __future__ import annotations

import random

import pytest
from sqlglot import exp, parse_one

import recsql
from recsql.executor.strategies.index import direct_select
from recsql.executor.strategies.lookup import MAX_KEYS
from tests import oracles
from tests.executor.test_lookup import _chain_and_fan
from tests.executor.test_placement import CC, SSSP

pytestmark = pytest.mark.usefixtures("spark_loop")


def _graph(n: int = 400, m: int = 1600, seed: int = 11) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    edges = {(rng.randrange(n), rng.randrange(n)): rng.randint(1, 20) for _ in range(m)}
    return [(s, d, c) for (s, d), c in edges.items() if s != d]


def _index_reads(result) -> list[int]:
    return [s.iteration for s in result.stats if s.index]


def test_sssp_reads_the_index_at_every_iteration_and_gives_the_oracle_answer(spark, view):
    # the direct form wins at every delta size (benchmarks/FINDINGS.md): no size rule
    edges = _graph()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP.replace("{t}", "edge").replace("SELECT 1, 0", "SELECT 0, 0"), spark=spark)
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(oracles.dijkstra(edges, 0).items())
    recursive = [s.iteration for s in result.stats if s.iteration > 0 and s.join_strategy != "-"]
    assert len(recursive) > 3 and _index_reads(result) == recursive


def test_a_tiny_delta_reads_only_its_keys_of_the_index_and_gives_the_oracle_answer(spark, view):
    # a long chain (deltas of one row) after a wide fan-out (a delta too large to filter by)
    edges = _chain_and_fan()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(SSSP.replace("{t}", "edge"), spark=spark)
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(oracles.dijkstra(edges, 1).items())
    delta_read = {s.iteration + 1: s.delta_rows for s in result.stats}
    filtered = [s.iteration for s in result.stats if s.index and s.lookup]
    tiny = [s.iteration for s in result.stats if s.index and delta_read[s.iteration] <= MAX_KEYS]
    assert len(tiny) > 8 and filtered == tiny
    # the fan-out's delta is read through the whole index
    assert any(s.index and not s.lookup and delta_read[s.iteration] > MAX_KEYS for s in result.stats)


def test_cc_with_the_index_gives_the_oracle_answer(spark, view):
    edges = _graph(300, 500, seed=5)
    both = sorted({(s, d, c) for s, d, c in edges} | {(d, s, c) for s, d, c in edges})
    view("edge", both, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    result = recsql.run(CC.replace("{t}", "edge"), spark=spark)
    assert {tuple(r) for r in result.df.collect()} == oracles.min_label_components([(s, d) for s, d, _ in both])
    assert _index_reads(result)


def test_a_branch_with_unqualified_columns_scans_the_copy_and_gives_the_oracle_answer(spark, view):
    # the direct form reads each side's columns by its name in the branch: none here
    edges = _graph(200, 700, seed=3)
    view("edge", edges, "Src BIGINT, Nb BIGINT, W BIGINT")
    query = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 0, 0)
      UNION (SELECT Nb, path.Cost + W FROM path, edge WHERE path.Dst = Src)
    SELECT Dst, Cost FROM path"""
    result = recsql.run(query, spark=spark)
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(oracles.dijkstra(edges, 0).items())
    assert not _index_reads(result)


def test_the_index_off_scans_the_copy_and_gives_the_oracle_answer(spark, view):
    edges = _graph()
    view("edge", edges, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    query = SSSP.replace("{t}", "edge").replace("SELECT 1, 0", "SELECT 0, 0")
    result = recsql.run(query, spark=spark, conf={"spark.recsql.index.enabled": "false"})
    assert sorted(tuple(r) for r in result.df.collect()) == sorted(oracles.dijkstra(edges, 0).items())
    assert not _index_reads(result)


def _bound(sql: str) -> exp.Expr:
    return parse_one(sql, read="rasql").transform(
        lambda n: exp.Placeholder(this=n.this, widget=True) if isinstance(n, exp.Placeholder) else n)


@pytest.mark.parametrize("sql, direct", [
    ("SELECT e.b, p.c + e.w FROM {r} AS p, {t} AS e WHERE p.a = e.a",
     "SELECT e.b, p.c + e.w FROM {j} WHERE p.a = e.a"),
    ("SELECT e.b FROM {r} AS p JOIN {t} AS e ON p.a = e.a AND e.w > 1 WHERE p.c < 3 OR e.w = 0",
     "SELECT e.b FROM {j} WHERE (p.c < 3 OR e.w = 0) AND (p.a = e.a AND e.w > 1)"),
    ("SELECT b FROM {r} AS p, {t} AS e WHERE p.a = e.a", None),  # unqualified
    ("SELECT e.* FROM {r} AS p, {t} AS e WHERE p.a = e.a", None),
    ("SELECT e.b FROM {r} AS p, {t} AS e, {u} AS f WHERE p.a = e.a AND f.x = e.b", None),
    ("SELECT e.b FROM {r} AS p LEFT JOIN {t} AS e ON p.a = e.a", None),
    ("SELECT e.b FROM {r} AS p JOIN {t} AS e USING (a)", None),
    ("SELECT e.b FROM {r} AS p, {t} AS e WHERE p.a = e.a AND e.b IN (SELECT 1)", None),
    ("SELECT DISTINCT e.b FROM {r} AS p, {t} AS e WHERE p.a = e.a", None),
])
def test_the_direct_form_of_a_branch(sql, direct):
    found = direct_select(_bound(sql), "r", "t", "j")
    assert (None if found is None else found[0].sql("rasql")) == direct
    if found is not None:
        assert found[1] == ("p", "e")
