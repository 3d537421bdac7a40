"""The state stays placed by its group key from the base step on (recsql/executor/state/relations.py): each
iteration's merge shuffles only its candidates, the state and its delta stay where they are.

A checkpoint records the partitioning of the plan it ran, and the next iteration relies on it.
Spark records it under the names the optimizer gave the plan's output, which differ from the
checkpoint's own when the optimizer rewrote the output (dropping an empty relation from the
merge's union did); the next merge then shuffles the state and its delta again, silently.
Answers are checked against plain-Python oracles."""

from __future__ import annotations

import re

import pytest

import recsql
from recsql.executor.loop import fixpoint
from tests import oracles

pytestmark = pytest.mark.usefixtures("spark_loop")

EDGES = [(1, 2, 4), (2, 3, 1), (1, 3, 7), (3, 4, 2), (4, 1, 1), (4, 5, 3), (5, 6, 1), (2, 6, 9), (7, 8, 1)]
SYMMETRIC = sorted({(s, d, c) for s, d, c in EDGES} | {(d, s, c) for s, d, c in EDGES})

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT {t}.Dst, path.Cost + {t}.Cost FROM path, {t} WHERE path.Dst = {t}.Src)
SELECT Dst, Cost FROM path"""
# the base step reads the base table too (the state's first placement comes from its copy)
CC = """WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM {t})
  UNION (SELECT {t}.Dst, cc.C FROM cc, {t} WHERE cc.X = {t}.Src)
SELECT X, C FROM cc"""


def _merge_shuffles(spark, monkeypatch, capsys, query: str, index: bool) -> tuple[list[tuple], list[int]]:
    """The answer, and per recursive iteration the shuffles its merge plans (those Spark adds to
    meet a requirement, not the base copy's own `repartition`), with the adjacency index on or
    off: every recursive iteration must have read it, or none."""
    shuffles: list[int] = []
    materialize = fixpoint.GroupRun.materialize

    def counting(run, cte, merged, iteration):
        if iteration > 0:
            capsys.readouterr()
            merged.explain()  # the physical plan, printed
            plan = capsys.readouterr().out
            shuffles.append(len(re.findall(r"Exchange hashpartitioning\([^)]*\), ENSURE_REQUIREMENTS", plan)))
        return materialize(run, cte, merged, iteration)

    monkeypatch.setattr(fixpoint.GroupRun, "materialize", counting)
    result = recsql.run(query, spark=spark, conf={"spark.recsql.index.enabled": str(index).lower()})
    assert all(s.index == index for s in result.stats if s.iteration)
    return sorted(tuple(r) for r in result.df.collect()), shuffles


# the base copy scanned, or read through the adjacency index (the default: index.py), which
# keeps the copy's placement, as its unnested rows do
@pytest.mark.parametrize("index", [True, False], ids=["index", "scan"])
@pytest.mark.parametrize("name", ["sssp", "cc"])
def test_each_merge_shuffles_only_its_candidates(spark, monkeypatch, capsys, name, index):
    table = f"placement_{name}"
    edges = EDGES if name == "sssp" else SYMMETRIC
    spark.createDataFrame(edges, "Src INT, Dst INT, Cost INT").createOrReplaceTempView(table)
    try:
        query = (SSSP if name == "sssp" else CC).replace("{t}", table)
        answer, shuffles = _merge_shuffles(spark, monkeypatch, capsys, query, index)
    finally:
        spark.catalog.dropTempView(table)
    if name == "sssp":
        expected = sorted(oracles.dijkstra(EDGES, 1).items())
    else:
        expected = sorted(oracles.min_label_components([(s, d) for s, d, _ in SYMMETRIC]))
    assert answer == expected
    assert shuffles and all(n == 1 for n in shuffles), shuffles
