"""The spelling tools parse (an aggregate with GROUP BY in a recursive term) plans exactly as
RaSQL's head aggregate, and every other use of an aggregate in a recursive term is a clear
error. No Spark: plans are compared as text (docs/dialect.md section 1)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser import parse_statement
from recsql.planner import render_plan
from recsql.planner.checks import FORBIDDEN_IN_RECURSIVE_BRANCH

from .test_planner import analysis_error, plan

# (RaSQL head form, the GROUP BY form tools parse): each pair must plan identically
SAME_PLAN = {
    "min": (
        "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT 1, 0 UNION "
        "SELECT e.Dst, p.Cost + e.Cost FROM path p JOIN edge e ON p.Dst = e.Src) SELECT Dst, Cost FROM path",
        "WITH RECURSIVE path (Dst, Cost) AS (SELECT 1, 0 UNION "
        "SELECT e.Dst, MIN(p.Cost + e.Cost) FROM path p JOIN edge e ON p.Dst = e.Src GROUP BY e.Dst) "
        "SELECT Dst, Cost FROM path",
    ),
    "min_rasql_body_and_alias": (
        "WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
        "(SELECT edge.Dst AS d, path.Cost + edge.Cost AS c FROM path, edge WHERE path.Dst = edge.Src) "
        "SELECT Dst, Cost FROM path",
        "WITH recursive path (Dst, Cost) AS (SELECT 1, 0) UNION "
        "(SELECT edge.Dst AS d, min(path.Cost + edge.Cost) AS c FROM path, edge WHERE path.Dst = edge.Src "
        "GROUP BY d) SELECT Dst, Cost FROM path",
    ),
    "max_by_position": (
        "WITH recursive actualdays (Part, max() AS Mdays) AS (SELECT report.Mgr, report.Emp FROM report) "
        "UNION (SELECT report.Mgr, actualdays.Mdays FROM report, actualdays WHERE report.Emp = actualdays.Part) "
        "SELECT Part, Mdays FROM actualdays",
        "WITH recursive actualdays (Part, Mdays) AS (SELECT report.Mgr, report.Emp FROM report) "
        "UNION (SELECT report.Mgr, MAX(actualdays.Mdays) FROM report, actualdays "
        "WHERE report.Emp = actualdays.Part GROUP BY 1) SELECT Part, Mdays FROM actualdays",
    ),
    "sum": (
        "WITH recursive bonus (M, sum() AS B) AS (SELECT M, P * 0.1 FROM sales) UNION "
        "(SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2) SELECT M, B FROM bonus",
        "WITH recursive bonus (M, B) AS (SELECT M, P * 0.1 FROM sales) UNION "
        "(SELECT sponsor.M1, SUM(bonus.B * 0.5) FROM bonus, sponsor WHERE bonus.M = sponsor.M2 "
        "GROUP BY sponsor.M1) SELECT M, B FROM bonus",
    ),
    "count_star": (
        "WITH RECURSIVE reached (X, count() AS N) AS (SELECT 1, 1 UNION "
        "SELECT edge.Dst, 1 FROM reached JOIN edge ON reached.X = edge.Src) SELECT * FROM reached",
        "WITH RECURSIVE reached (X, N) AS (SELECT 1, 1 UNION "
        "SELECT edge.Dst, COUNT(*) FROM reached JOIN edge ON reached.X = edge.Src GROUP BY edge.Dst) "
        "SELECT * FROM reached",
    ),
    "count_column": (
        "WITH RECURSIVE reached (X, count() AS N) AS (SELECT 1, 1 UNION "
        "SELECT edge.Dst, CASE WHEN NOT edge.Cost IS NULL THEN 1 ELSE 0 END FROM reached JOIN edge "
        "ON reached.X = edge.Src) SELECT * FROM reached",
        "WITH RECURSIVE reached (X, N) AS (SELECT 1, 1 UNION "
        "SELECT edge.Dst, COUNT(edge.Cost) FROM reached JOIN edge ON reached.X = edge.Src GROUP BY edge.Dst) "
        "SELECT * FROM reached",
    ),
    "key_after_aggregate_and_two_keys": (
        "WITH RECURSIVE sp (min() AS D, X, Y) AS (SELECT Cost, Src, Dst FROM edge UNION "
        "SELECT sp.D + edge.Cost, sp.X, edge.Dst FROM sp JOIN edge ON sp.Y = edge.Src) SELECT * FROM sp",
        "WITH RECURSIVE sp (D, X, Y) AS (SELECT Cost, Src, Dst FROM edge UNION "
        "SELECT MIN(sp.D + edge.Cost), sp.X, edge.Dst FROM sp JOIN edge ON sp.Y = edge.Src "
        "GROUP BY edge.dst, SP.x) SELECT * FROM sp",
    ),
    "names_from_the_anchor": (
        "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT Src AS Dst, 0 AS Cost FROM edge UNION "
        "SELECT edge.Dst, path.Cost + 1 FROM path JOIN edge ON path.Dst = edge.Src) SELECT * FROM path",
        "WITH RECURSIVE path AS (SELECT Src AS Dst, 0 AS Cost FROM edge UNION "
        "SELECT edge.Dst, MIN(path.Cost + 1) FROM path JOIN edge ON path.Dst = edge.Src GROUP BY ALL) "
        "SELECT * FROM path",
    ),
    "two_recursive_terms": (
        "WITH RECURSIVE r (X, min() AS C) AS (SELECT 1, 0 UNION "
        "SELECT edge.Dst, r.C + edge.Cost FROM r JOIN edge ON r.X = edge.Src UNION "
        "SELECT edge.Src, r.C + edge.Cost FROM r JOIN edge ON r.X = edge.Dst) SELECT * FROM r",
        "WITH RECURSIVE r (X, C) AS (SELECT 1, 0 UNION "
        "SELECT edge.Dst, MIN(r.C + edge.Cost) FROM r JOIN edge ON r.X = edge.Src GROUP BY edge.Dst UNION "
        "SELECT edge.Src, MIN(r.C + edge.Cost) FROM r JOIN edge ON r.X = edge.Dst GROUP BY edge.Src) "
        "SELECT * FROM r",
    ),
    "mutual_recursion": (
        "WITH RECURSIVE a (X, min() AS C) AS (SELECT 1, 0 UNION SELECT edge.Dst, b.C + 1 FROM b JOIN edge "
        "ON b.X = edge.Src), b (X, min() AS C) AS (SELECT edge.Dst, a.C + edge.Cost FROM a JOIN edge "
        "ON a.X = edge.Src) SELECT * FROM a",
        "WITH RECURSIVE a (X, C) AS (SELECT 1, 0 UNION SELECT edge.Dst, MIN(b.C + 1) FROM b JOIN edge "
        "ON b.X = edge.Src GROUP BY edge.Dst), b (X, C) AS (SELECT edge.Dst, MIN(a.C + edge.Cost) FROM a "
        "JOIN edge ON a.X = edge.Src GROUP BY edge.Dst) SELECT * FROM a",
    ),
    "anchor_group_by_is_plain_sql": (
        "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT Src, MIN(Cost) FROM edge GROUP BY Src UNION "
        "SELECT edge.Dst, path.Cost + edge.Cost FROM path JOIN edge ON path.Dst = edge.Src) SELECT * FROM path",
        "WITH RECURSIVE path (Dst, Cost) AS (SELECT Src, MIN(Cost) FROM edge GROUP BY Src UNION "
        "SELECT edge.Dst, MIN(path.Cost + edge.Cost) FROM path JOIN edge ON path.Dst = edge.Src "
        "GROUP BY edge.Dst) SELECT * FROM path",
    ),
    "group_by_without_aggregate_is_union": (
        "WITH RECURSIVE r (X) AS (SELECT 1 UNION SELECT edge.Dst FROM r JOIN edge ON r.X = edge.Src) "
        "SELECT * FROM r",
        "WITH RECURSIVE r (X) AS (SELECT 1 UNION SELECT edge.Dst FROM r JOIN edge ON r.X = edge.Src "
        "GROUP BY edge.Dst) SELECT * FROM r",
    ),
    "min_by": (
        "WITH RECURSIVE path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT 1, 0, 1 UNION "
        "SELECT e.Dst, p.Cost + e.Cost, e.Src FROM path p JOIN edge e ON p.Dst = e.Src) SELECT * FROM path",
        "WITH RECURSIVE path (Dst, Cost, Pred) AS (SELECT 1, 0, 1 UNION SELECT e.Dst, MIN(p.Cost + e.Cost), "
        "MIN_BY(e.Src, p.cost + e.cost) FROM path p JOIN edge e ON p.Dst = e.Src GROUP BY e.Dst) "
        "SELECT * FROM path",
    ),
    "max_by_two_payloads_before_the_max": (
        "WITH recursive longest (Dst, argmax(Len) AS Via, max() AS Len, argmax(Len) AS Cost) AS "
        "(SELECT 1, 1, 0, 0) UNION (SELECT edge.Dst, edge.Src, longest.Len + 1, edge.Cost FROM longest, edge "
        "WHERE longest.Dst = edge.Src) SELECT * FROM longest",
        "WITH recursive longest (Dst, Via, Len, Cost) AS (SELECT 1, 1, 0, 0) UNION (SELECT edge.Dst, "
        "max_by(edge.Src, longest.Len + 1), MAX(longest.Len + 1), MAX_BY(edge.Cost, longest.Len + 1) "
        "FROM longest, edge WHERE longest.Dst = edge.Src GROUP BY edge.Dst) SELECT * FROM longest",
    ),
}


@pytest.mark.parametrize("rasql,tools", SAME_PLAN.values(), ids=SAME_PLAN)
def test_group_by_spelling_plans_as_the_head(rasql, tools):
    assert render_plan(plan(tools)) == render_plan(plan(rasql))


def test_the_issue_example_plans_as_its_head_form():
    catalog_query = ("WITH RECURSIVE path (dst, cost) AS (\n  SELECT 1, 0\n  UNION\n  SELECT e.dst, "
                     "MIN(p.cost + e.cost) FROM path p JOIN edge e ON p.dst = e.src GROUP BY e.dst)\n"
                     "SELECT dst, cost FROM path")
    (cte,) = plan(catalog_query).groups[0].ctes
    assert [c.render() for c in cte.head] == ["dst", "min() AS cost"]
    assert not cte.recursive_branches[0].select.args.get("group")


def test_tools_parse_the_group_by_spelling_and_not_the_head():
    rasql, tools = SAME_PLAN["min"]
    for dialect in ("hive", "spark"):
        with pytest.raises(sqlglot.errors.ParseError):
            sqlglot.parse_one(rasql, read=dialect)
        again = sqlglot.parse_one(tools, read=dialect).sql(dialect=dialect, pretty=True)
        assert render_plan(plan(again)) == render_plan(plan(rasql))


def test_union_all_term_keeps_its_per_step_aggregate():
    q = ("WITH RECURSIVE path (Dst, Cost) AS (SELECT 1, 0 UNION ALL SELECT e.Dst, MIN(p.Cost + e.Cost) "
         "FROM path p JOIN edge e ON p.Dst = e.Src GROUP BY e.Dst) SELECT * FROM path")
    (cte,) = plan(q).groups[0].ctes
    assert cte.bag and not cte.aggregates
    (term,) = cte.recursive_branches
    assert term.select.args.get("group") and term.select.find(exp.Min)
    assert term.aggregating and not term.splittable  # no slicing of a step's rows


def test_the_statement_ast_is_not_changed():
    _, tools = SAME_PLAN["min"]
    parsed = parse_statement(tools).expression
    before = parsed.sql("rasql")
    plan_ = plan(tools)
    assert plan_ is not None and parsed.sql("rasql") == before


def test_forbidden_advice_names_the_spelling_tools_parse():
    advice = {what: fix for _, what, fix in FORBIDDEN_IN_RECURSIVE_BRANCH}
    assert "GROUP BY" in advice["aggregation"] and "MIN(" in advice["aggregation"]
    assert "GROUP BY" in advice["GROUP BY"]


# --------------------------------------------------------------------------------------- errors

HEAD = "WITH RECURSIVE path (Dst, Cost) AS (SELECT 1, 0 UNION\n"
TAIL = "\n) SELECT Dst, Cost FROM path"
JOIN = "FROM path JOIN edge ON path.Dst = edge.Src"

ERRORS = {
    "mixed_spellings": (
        "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT 1, 0 UNION\n"
        f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_MIXED_AGGREGATE_SPELLING", "MIN(", ("drop the head", "min() AS Cost")),
    "mixed_spellings_group_by_only": (
        "WITH RECURSIVE path (Dst, min() AS Cost) AS (SELECT 1, 0 UNION\n"
        f"SELECT edge.Dst, path.Cost + edge.Cost {JOIN} GROUP BY edge.Dst, path.Cost + edge.Cost" + TAIL,
        "RECSQL_MIXED_AGGREGATE_SPELLING", "edge.Dst, path.Cost + edge.Cost\n", ("one spelling",)),
    "group_by_extra_column": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst, edge.Src" + TAIL,
        "RECSQL_GROUP_BY_NOT_KEY", "edge.Src" + TAIL[:1], ("`edge.Src`", "exactly its other output columns")),
    "group_by_missing_key": (
        "WITH RECURSIVE sp (X, Y, D) AS (SELECT Src, Dst, Cost FROM edge UNION\n"
        "SELECT sp.X, edge.Dst, MIN(sp.D + edge.Cost) FROM sp JOIN edge ON sp.Y = edge.Src GROUP BY sp.X"
        "\n) SELECT * FROM sp",
        "RECSQL_GROUP_BY_NOT_KEY", "edge.Dst, MIN", ("leaves out", "edge.Dst")),
    "group_by_the_aggregate_position": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY 1, 2" + TAIL,
        "RECSQL_GROUP_BY_NOT_KEY", "2" + TAIL[:1], ("`2`",)),
    "no_group_by": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN}" + TAIL,
        "RECSQL_GROUP_BY_NOT_KEY", "edge.Dst, MIN", ("no GROUP BY",)),
    "rollup": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY ROLLUP (edge.Dst)" + TAIL,
        "RECSQL_GROUP_BY_NOT_KEY", "edge.Dst)", ("ROLLUP",)),
    "avg": (
        HEAD + f"SELECT edge.Dst, AVG(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_UNSUPPORTED_HEAD_AGGREGATE", "AVG(", ("AVG(", "MIN, MAX, SUM or COUNT", "not a function")),
    "min_by": (
        HEAD + f"SELECT edge.Dst, MIN_BY(edge.Src, path.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_INVALID_PAYLOAD", "edge.Src, path.Cost)", ("needs `MIN(path.Cost)`", "payload")),
    "collect_set": (
        HEAD + f"SELECT edge.Dst, COLLECT_SET(path.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_UNSUPPORTED_HEAD_AGGREGATE", "COLLECT_SET(", ("no head aggregate for it",)),
    "count_distinct": (
        HEAD + f"SELECT edge.Dst, COUNT(DISTINCT path.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_UNSUPPORTED_HEAD_AGGREGATE", "COUNT(", ("COUNT(*) or COUNT(x)",)),
    "sum_distinct": (
        HEAD + f"SELECT edge.Dst, SUM(DISTINCT path.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_UNSUPPORTED_HEAD_AGGREGATE", "SUM(", ("DISTINCT",)),
    "filter": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost) FILTER (WHERE edge.Cost > 0) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_UNSUPPORTED_HEAD_AGGREGATE", "MIN(", ("FILTER", "WHERE")),
    "having": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst HAVING MIN(path.Cost) < 9"
        + TAIL, "RECSQL_HAVING_IN_RECURSION", "MIN(path.Cost) <", ("final query",)),
    "nested_aggregate": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost) + 1 {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_AGGREGATE_NOT_WHOLE_COLUMN", "MIN(path.Cost) +", ("whole output column",)),
    "aggregate_in_where": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost) {JOIN} WHERE MAX(edge.Cost) > 1 GROUP BY edge.Dst" + TAIL,
        "RECSQL_AGGREGATE_NOT_WHOLE_COLUMN", "MAX(", ("whole output column",)),
    "two_functions": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst UNION\n"
        f"SELECT edge.Src, MAX(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Src" + TAIL,
        "RECSQL_INCONSISTENT_RECURSIVE_AGGREGATES", "MAX(", ("MIN on output column 2", "MAX on output column 2")),
    "sum_and_count": (
        HEAD + f"SELECT edge.Dst, SUM(path.Cost) {JOIN} GROUP BY edge.Dst UNION\n"
        f"SELECT edge.Src, COUNT(*) {JOIN} GROUP BY edge.Src" + TAIL,
        "RECSQL_INCONSISTENT_RECURSIVE_AGGREGATES", "COUNT(", ("same function",)),
    "plain_term_beside_aggregate": (
        HEAD + f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst UNION\n"
        f"SELECT edge.Src, path.Cost {JOIN}" + TAIL,
        "RECSQL_INCONSISTENT_RECURSIVE_AGGREGATES", "edge.Src, path.Cost FROM", ("no aggregate",)),
    "unnamed_columns": (
        "WITH RECURSIVE path AS (SELECT 1, 0 UNION\n"
        f"SELECT edge.Dst, MIN(path.Cost + edge.Cost) {JOIN} GROUP BY edge.Dst" + TAIL,
        "RECSQL_AGGREGATE_NEEDS_COLUMN_NAMES", "path AS", ("column list",)),
}


@pytest.mark.parametrize("q,condition,at,says", ERRORS.values(), ids=ERRORS)
def test_other_aggregates_in_a_recursive_term_are_clear_errors(q, condition, at, says):
    err = analysis_error(q)
    assert err.condition == condition, err
    offset = q.index(at)
    assert (err.line, err.pos) == (q.count("\n", 0, offset) + 1, offset - (q.rfind("\n", 0, offset) + 1)), err
    for text in says:
        assert text in err.message, err.message


def test_errors_are_analysis_errors_with_the_statement():
    q = ERRORS["avg"][0]
    err = analysis_error(q)
    assert isinstance(err, RecSQLAnalysisError) and "== SQL ==" in str(err.with_sql(q))


@pytest.mark.parametrize("term, says", [
    ("SELECT e.Dst, MIN(p.Cost + e.Cost), MIN_BY(e.Src, p.Cost) FROM path p JOIN edge e "
     "ON p.Dst = e.Src GROUP BY e.Dst", "needs `MIN(p.Cost)` as another output column"),
    ("SELECT e.Dst, MIN(p.Cost + e.Cost), MAX_BY(e.Src, p.Cost + e.Cost) FROM path p JOIN edge e "
     "ON p.Dst = e.Src GROUP BY e.Dst", "needs `MAX(p.Cost + e.Cost)`"),
    ("SELECT e.Dst, SUM(p.Cost + e.Cost), MIN_BY(e.Src, p.Cost + e.Cost) FROM path p JOIN edge e "
     "ON p.Dst = e.Src GROUP BY e.Dst", "needs `MIN(p.Cost + e.Cost)`"),
])
def test_min_by_without_its_extremum(term, says):
    q = f"WITH RECURSIVE path (Dst, Cost, Pred) AS (SELECT 1, 0, 1 UNION {term}) SELECT * FROM path"
    err = analysis_error(q)
    assert err.condition == "RECSQL_INVALID_PAYLOAD" and says in err.message
    start = q.index("_BY(") - 3  # within the MIN_BY / MAX_BY call
    assert start <= err.pos < q.index(")", start)


def test_min_by_beside_a_sum_is_rejected():
    q = ("WITH RECURSIVE path (Dst, Cost, Pred, N) AS (SELECT 1, 0, 1, 1 UNION SELECT e.Dst, "
         "MIN(p.Cost + e.Cost), MIN_BY(e.Src, p.Cost + e.Cost), SUM(1) FROM path p JOIN edge e "
         "ON p.Dst = e.Src GROUP BY e.Dst) SELECT * FROM path")
    err = analysis_error(q)
    assert err.condition == "RECSQL_INVALID_PAYLOAD" and "sum() AS N" in err.message
