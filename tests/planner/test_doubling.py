"""Recursive doubling for transitive closure: which CTEs the planner gives a doubling rule
(no Spark), and that switching to it gives the closure an independent oracle computes."""

from __future__ import annotations

import random

import networkx as nx
import oracles
import pytest
from conftest import rows, unique_name

import recsql
from recsql.parser import parse_statement
from recsql.planner import DictCatalog, plan_query, render_plan

CATALOG = DictCatalog({"edge": ["Src", "Dst", "Cost"]})

RIGHT_LINEAR = ("WITH recursive tc (A, B) AS (SELECT Src, Dst FROM {t}) UNION "
                "(SELECT tc.A, {t}.Dst FROM tc, {t} WHERE tc.B = {t}.Src) SELECT A, B FROM tc")
LEFT_LINEAR = ("WITH recursive tc (A, B) AS (SELECT Src, Dst FROM {t}) UNION "
               "(SELECT e.Src, tc.B FROM {t} e JOIN tc ON e.Dst = tc.A) SELECT A, B FROM tc")


def doubling_of(query: str):
    plan = plan_query(parse_statement(query).expression, query, CATALOG)
    return plan.groups[0].ctes[0].doubling, plan


@pytest.mark.parametrize("query", [RIGHT_LINEAR, LEFT_LINEAR])
def test_linear_closures_get_a_doubling_rule(query):
    rule, plan = doubling_of(query.format(t="edge"))
    assert rule is not None
    assert [r.cte for r in rule.refs] == ["tc", "tc"]
    # the round that switches joins the whole relation with itself, once
    assert plan.groups[0].ctes[0].doubling_switch == (("all", "all"),)
    assert "recursive doubling" in render_plan(plan)


@pytest.mark.parametrize("query", [
    # an extra condition: not the closure of the base relation
    "WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION (SELECT tc.A, edge.Dst "
    "FROM tc, edge WHERE tc.B = edge.Src AND edge.Cost > 1) SELECT A, B FROM tc",
    # the base relation reversed against the recursive join
    "WITH recursive tc (A, B) AS (SELECT Dst, Src FROM edge) UNION (SELECT tc.A, edge.Dst "
    "FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc",
    # the wrong output column
    "WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION (SELECT tc.A, edge.Src "
    "FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc",
    # an aggregate head (doubling is for set semantics only)
    "WITH recursive tc (A, B, min() AS C) AS (SELECT Src, Dst, Cost FROM edge) UNION "
    "(SELECT tc.A, edge.Dst, tc.C + edge.Cost FROM tc, edge WHERE tc.B = edge.Src) "
    "SELECT A, B, C FROM tc",
    # UNION ALL keeps every derivation: doubling would change the multiplicities
    "WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge) UNION ALL (SELECT tc.A, edge.Dst "
    "FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc",
    # a filtered base branch
    "WITH recursive tc (A, B) AS (SELECT Src, Dst FROM edge WHERE Cost > 0) UNION "
    "(SELECT tc.A, edge.Dst FROM tc, edge WHERE tc.B = edge.Src) SELECT A, B FROM tc",
])
def test_other_recursions_keep_their_linear_rules(query):
    rule, _ = doubling_of(query)
    assert rule is None


def chain(n):
    return [(i, i + 1) for i in range(n)]


def binary_tree_up(depth):
    return [(child, (child - 1) // 2) for child in range(1, 2 ** (depth + 1) - 1)]


def random_graph(n, m, seed):
    rng = random.Random(seed)
    return sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(m)})


GRAPHS = {
    "chain-40": chain(40),
    "tree-up-5": binary_tree_up(5),
    "cycle-with-tail": [(i, (i + 1) % 12) for i in range(12)] + [(11, 20), (20, 21), (21, 22)],
    "random-30": random_graph(30, 45, seed=7),
}


# The tests below run the Spark loop's own machinery (doubling is a strategy of it): every
# iteration on Spark, with the `spark_loop` fixture. The planner tests above need no Spark.


@pytest.mark.usefixtures("spark_loop")
@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("query", [RIGHT_LINEAR, LEFT_LINEAR], ids=["right", "left"])
def test_doubling_gives_the_transitive_closure(spark, view, name, query):
    edges = GRAPHS[name]
    table = unique_name("arc")
    view(table, edges, "Src int, Dst int")
    expected = oracles.transitive_closure(edges)
    assert expected == set(nx.transitive_closure(nx.DiGraph(edges), reflexive=False).edges())
    result = recsql.run(query.format(t=table), spark=spark,
                        conf={"spark.recsql.doubling.afterIterations": 2})
    assert set(rows(result.df)) == expected


@pytest.mark.usefixtures("spark_loop")
def test_doubling_cuts_the_rounds_of_a_long_chain(spark, view):
    edges = chain(20)
    table = unique_name("arc")
    view(table, edges, "Src int, Dst int")
    query = RIGHT_LINEAR.format(t=table)
    linear = recsql.run(query, spark=spark, conf={"spark.recsql.doubling.afterIterations": 0})
    doubled = recsql.run(query, spark=spark, conf={"spark.recsql.doubling.afterIterations": 2})
    expected = oracles.transitive_closure(edges)
    assert set(rows(linear.df)) == expected == set(rows(doubled.df))
    # Linear: one iteration per path length (20; the last derives nothing). Doubling after 2:
    # paths up to 3 long, the switch round (up to 6), then 12, 24 and an empty round.
    assert len(linear.stats) - 1 == 20
    assert len(doubled.stats) - 1 <= 7


@pytest.mark.slow  # skew splitting is off by default: with `-m slow`, as tests/executor/test_skew.py
@pytest.mark.usefixtures("spark_loop")
def test_doubling_with_roll_over_and_skew_splitting_forced(spark, view):
    """Roll-over slices only linear rounds and skew splitting only base joins: forcing both
    (tiny budgets) around the switch to doubling must not lose pairs."""
    edges = binary_tree_up(4) + chain(12)
    table = unique_name("arc")
    view(table, edges, "Src int, Dst int")
    conf = {"spark.recsql.doubling.afterIterations": 2, "spark.recsql.rollover.maxRows": 5,
            "spark.recsql.skew.enabled": "true", "spark.recsql.skew.minRows": 0,
            "spark.recsql.skew.threshold": 0.01}
    result = recsql.run(RIGHT_LINEAR.format(t=table), spark=spark, conf=conf)
    assert set(rows(result.df)) == oracles.transitive_closure(edges)
    assert any(s.slices > 1 for s in result.stats), "the linear rounds rolled over"
