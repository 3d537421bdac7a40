"""The plain CTEs only the final query reads are written into it (IterationRunner.execute runs one Spark
query for them): which view steps are inlined, and the text Spark gets (no Spark here; every
end-to-end test of a CTE or a recursive view over a recursion runs the inlined form)."""

from __future__ import annotations

from recsql.executor.loop.spark_sql import render
from recsql.executor.run import inline_trailing_views
from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, ViewStep, plan_query

TC = ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
      "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src), ")


def plan(sql: str):
    return plan_query(parse_statement(sql).expression, sql, DictCatalog({"edge": ["Src", "Dst"]}))


def test_a_chain_of_plain_ctes_after_the_recursion_becomes_derived_tables():
    p = plan(TC + "v (a, b) AS (SELECT X, Y FROM tc), w AS (SELECT a FROM v WHERE b > 2) "
                  "SELECT a FROM w WHERE a = 3")
    steps, final = inline_trailing_views(p)
    assert [type(s) for s in steps] == [GroupStep]
    assert render(final, escape_braces=True) == (
        "SELECT `a` FROM (SELECT `a` FROM (SELECT `X`, `Y` FROM {rq_cte_tc} AS `tc`) AS `v`(`a`, `b`) "
        "WHERE `b` > 2) AS `w` WHERE `a` = 3")
    assert len(p.steps) == 3 and "rq_cte_w" in render(p.final, escape_braces=True)  # the plan is kept


def test_a_cte_read_twice_or_before_the_recursion_stays_a_step():
    p = plan(TC + "v AS (SELECT X, Y FROM tc) SELECT a.X FROM v a JOIN v b ON a.Y = b.X")
    steps, final = inline_trailing_views(p)
    assert steps == p.steps and final is p.final
    p = plan("WITH e2 AS (SELECT Src, Dst FROM edge), recursive tc (X, Y) AS (SELECT Src, Dst FROM e2 "
             "UNION SELECT tc.X, e2.Dst FROM tc, e2 WHERE tc.Y = e2.Src) SELECT X FROM tc")
    steps, final = inline_trailing_views(p)
    assert [type(s) for s in steps] == [ViewStep, GroupStep] and final is p.final
