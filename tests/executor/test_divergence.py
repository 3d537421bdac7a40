"""A fixpoint that never comes (a negative cycle under min(), a counter under max() on a cycle,
a UNION ALL recursion without end) stops with the iteration-limit error on every path: the
driver endgame, the Spark loop, roll-over slices. Never a hang, never a partial result."""

from __future__ import annotations

import networkx as nx
import pytest

import recsql
from recsql import RecSQLExecutionError

EDGES = [(1, 2, 1), (2, 3, -2), (3, 2, 1), (3, 4, 5)]  # 2 -> 3 -> 2 costs -1: a negative cycle

PATHS = {
    "default": {},
    "spark_loop": {"spark.recsql.endgame.enabled": "false"},
    "rollover": {"spark.recsql.endgame.enabled": "false", "spark.recsql.rollover.maxRows": "1"},
}

DIVERGENT = {
    "negative_cycle_min": """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
        UNION (SELECT neg.Dst, path.Cost + neg.Cost FROM path, neg WHERE path.Dst = neg.Src)
        SELECT Dst, Cost FROM path""",
    "growing_max_on_a_cycle": """WITH recursive m (N, max() AS V) AS (SELECT 2, 0)
        UNION (SELECT neg.Dst, m.V + 1 FROM m, neg WHERE m.N = neg.Src)
        SELECT N, V FROM m""",
    "union_all_without_end": """WITH RECURSIVE r (N) AS (SELECT 1 UNION ALL SELECT N + 1 FROM r)
        SELECT N FROM r""",
}


def test_the_graph_has_a_negative_cycle():
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    assert nx.negative_edge_cycle(graph)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("query", list(DIVERGENT))
def test_divergent_fixpoint_stops_with_the_iteration_limit(spark, view, query, path):
    view("neg", EDGES, "Src int, Dst int, Cost int")
    conf = {"spark.recsql.maxIterations": "12", **PATHS[path]}
    with pytest.raises(RecSQLExecutionError) as error:
        recsql.sql(DIVERGENT[query], spark=spark, conf=conf).collect()
    assert error.value.condition == "RECSQL_MAX_ITERATIONS"
    assert "spark.recsql.maxIterations = 12" in str(error.value)
