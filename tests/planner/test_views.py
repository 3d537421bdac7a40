"""Expanding stored recursive views into the reading statement (no Spark): the plan it gives is
the plan of the same statement written with the view's WITH clause by hand."""

from __future__ import annotations

import pytest
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, ViewStep, plan_query
from recsql.planner.catalog import StoredView
from recsql.planner.views import expand_views

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""
TABLES = {"edge": ["Src", "Dst", "Cost"]}


def catalog(**views: str) -> DictCatalog:
    stored = {}
    for name, text in views.items():
        columns = ("Dst", "Cost") if "path" in text else ("Node",)
        stored[name] = StoredView(f"default.{name}", text, columns)
        stored[f"default.{name}"] = stored[name]
    return DictCatalog(TABLES, stored)


def expand(sql: str, cat: DictCatalog):
    return expand_views(parse_statement(sql).expression, cat, sql)


def test_a_read_becomes_ctes_with_the_views_own_ctes_renamed():
    cat = catalog(sp=SSSP)
    expansion = expand("SELECT count(*) FROM sp WHERE Cost > 3", cat)
    assert [v.name for v in expansion.views] == ["default.sp"]
    with_ = expansion.query.args["with_"]
    assert [c.alias for c in with_.expressions] == ["sp__path", "sp"]
    plan = plan_query(expansion.query, "", cat)
    assert isinstance(plan.steps[0], GroupStep) and plan.steps[0].ctes[0].name == "sp__path"
    assert [c.render() for c in plan.steps[0].ctes[0].head] == ["Dst", "min() AS Cost"]
    assert isinstance(plan.steps[1], ViewStep) and plan.steps[1].columns == ("Dst", "Cost")


def test_qualified_reads_and_aliases_read_one_expansion():
    cat = catalog(sp=SSSP)
    query = expand("SELECT a.Cost FROM default.sp a JOIN sp ON a.Dst = sp.Dst", cat).query
    assert [c.alias for c in query.args["with_"].expressions] == ["sp__path", "sp"]
    assert {(t.name, t.alias) for t in query.find_all(exp.Table)
            if t.name == "sp"} == {("sp", "a"), ("sp", "sp")}


def test_views_of_views_and_the_readers_own_ctes():
    cat = catalog(sp=SSSP, near="SELECT Dst AS Node FROM sp WHERE Cost < 4")
    expansion = expand("WITH path AS (SELECT 1 AS x) SELECT * FROM near, path", cat)
    names = [c.alias for c in expansion.query.args["with_"].expressions]
    assert names == ["near__sp__path", "near__sp", "near", "path"]
    assert [v.name for v in expansion.views] == ["default.near", "default.sp"]


def test_a_cte_of_the_reader_shadows_a_view():
    cat = catalog(sp=SSSP)
    expansion = expand("WITH sp AS (SELECT 1 AS Dst) SELECT * FROM sp", cat)
    assert expansion.views == [] and plan_query(expansion.query, "", cat) is None


def test_a_view_reading_itself_is_a_clear_error():
    cat = catalog(a="SELECT Node FROM b", b="SELECT Node FROM a")
    with pytest.raises(RecSQLAnalysisError, match="RECSQL_VIEW_CYCLE"):
        expand("SELECT * FROM a", cat)


def test_a_statement_reading_no_view_is_left_as_it_is():
    statement = parse_statement("SELECT * FROM edge").expression
    assert expand_views(statement, catalog(sp=SSSP)).query is statement
