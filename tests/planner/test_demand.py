"""Demand-driven evaluation in the planner (no Spark): which filters reach a recursion's base
branches, and the reasons given where one does not."""

from __future__ import annotations

import pytest
from sqlglot import exp

from recsql.errors import RecSQLAnalysisError
from recsql.parser import parse_statement
from recsql.planner import DictCatalog, GroupStep, plan_query, render_plan
from recsql.planner.catalog import StoredView
from recsql.planner.views import expand_views

TABLES = {"edge": ["Src", "Dst", "Cost"]}
TC = ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
      "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) ")
APSP = ("WITH recursive path (Src, Dst, min() AS Cost) AS (SELECT Src, Dst, Cost FROM edge UNION "
        "SELECT path.Src, edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) ")


def plan(sql: str, views=None, demand=True):
    cat = DictCatalog(TABLES, views)
    query = expand_views(parse_statement(sql).expression, cat, sql).query
    return plan_query(query, sql, cat, demand=demand)


def anchors(p, name: str) -> list[str]:
    cte = next(c for s in p.steps if isinstance(s, GroupStep) for c in s.ctes if c.name == name)
    return [(b.select.args["where"].this.sql("rasql") if b.select.args.get("where") else "")
            for b in cte.base_branches]


@pytest.mark.parametrize("where, pushed", [
    ("X = 9", "Src = 9"),
    ("tc.X IN (1, 2)", "Src IN (1, 2)"),
    ("X BETWEEN 1 AND 4", "Src BETWEEN 1 AND 4"),
    ("3 < X AND X <= 7", "3 < Src AND Src <= 7"),
    ("X = -1 AND Y > 2", "Src = -1"),
    ("X = :node", "Src = :node"),
])
def test_a_filter_on_the_carried_column_reaches_the_anchor(where, pushed):
    p = plan(TC + f"SELECT * FROM tc WHERE {where}")
    assert anchors(p, "tc") == [pushed]
    assert "pushed" in p.demand[0] and "into the base branches of tc" in p.demand[0]
    assert p.final.args["where"].this.sql("rasql") == where  # the final filter stays
    assert p.steps[0].ctes[0].doubling is None  # doubling joins rows of other X values


def test_off_leaves_the_plan_as_written():
    p = plan(TC + "SELECT * FROM tc WHERE X = 9", demand=False)
    assert anchors(p, "tc") == [""] and p.demand == []
    assert p.steps[0].ctes[0].doubling is not None


def test_group_key_of_a_head_aggregate_is_pushed_the_aggregate_is_not():
    p = plan(APSP + "SELECT * FROM path WHERE Src = 1 AND Cost < 5")
    assert anchors(p, "path") == ["Src = 1"]
    assert any("not pushed Cost < 5" in n and "aggregated" in n for n in p.demand)


def test_group_by_spelling_is_pushed_on_its_group_key():
    sql = ("WITH recursive path (Src, Dst, Cost) AS (SELECT Src, Dst, Cost FROM edge UNION "
           "SELECT p.Src, e.Dst, MIN(p.Cost + e.Cost) FROM path p JOIN edge e ON p.Dst = e.Src "
           "GROUP BY p.Src, e.Dst) SELECT Dst, Cost FROM path WHERE Src = 2")
    assert anchors(plan(sql), "path") == ["Src = 2"]


def test_a_computed_anchor_column_is_filtered_as_computed():
    sql = ("WITH recursive tc (X, Y) AS (SELECT Src + 1, Dst FROM edge WHERE Cost > 0 UNION "
           "SELECT tc.X, edge.Dst FROM tc JOIN edge ON tc.Y = edge.Src) "
           "SELECT Y FROM tc WHERE X = 9")
    assert anchors(plan(sql), "tc") == ["Cost > 0 AND (Src + 1) = 9"]


def test_joined_final_query_pushes_only_the_ctes_own_conjuncts():
    sql = TC + "SELECT tc.Y, e.Cost FROM tc JOIN edge e ON tc.Y = e.Src WHERE tc.X = 4 AND e.Cost > 1"
    assert anchors(plan(sql), "tc") == ["Src = 4"]


@pytest.mark.parametrize("sql, reason", [
    (APSP + "SELECT * FROM path WHERE Dst = 9", "not carried unchanged by recursive branch 2"),
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge WHERE Cost > 1 UNION "
     "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE Y = 1",
     "not carried unchanged"),
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION ALL "
     "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE Y = 1",
     "not carried unchanged"),
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
     "SELECT a.X, b.Y FROM tc a, tc b WHERE a.Y = b.X) SELECT * FROM tc WHERE X = 1", "non-linear"),
    (TC + "SELECT * FROM tc WHERE X = 1 AND Y IN (SELECT X FROM tc)", "tc has 1 other read in the statement"),
    (TC + "SELECT a.Y FROM tc a JOIN tc b ON a.Y = b.X WHERE a.X = 1", "not every read is filtered"),
    (TC + "SELECT X FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y = 2 UNION SELECT Y FROM tc",
     "not every read is filtered"),
    (TC + "SELECT X FROM tc WHERE X = 1 UNION SELECT X FROM tc", "not every read is filtered"),
    (TC + "SELECT X FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y IN (SELECT 2)",
     "not every read is filtered"),
    ("WITH recursive a (X, Y) AS (SELECT Src, Dst FROM edge UNION SELECT b.X, edge.Dst FROM b, edge "
     "WHERE b.Y = edge.Src), b (X, Y) AS (SELECT a.X, a.Y FROM a) SELECT * FROM a WHERE X = 1",
     "mutually recursive"),
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
     "SELECT tc.X + 0, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE X = 1",
     "not carried unchanged"),
    ("WITH recursive tc (X, Y) AS (SELECT max(Src), Dst FROM edge GROUP BY Dst UNION "
     "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE X = 1",
     "which its WHERE cannot filter"),
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
     "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) SELECT * FROM tc WHERE X = Y", None),
])
def test_not_pushed_where_unsound(sql, reason):
    p, off = plan(sql), plan(sql, demand=False)
    names = [c.name for s in off.steps if isinstance(s, GroupStep) for c in s.ctes]
    assert [anchors(p, n) for n in names] == [anchors(off, n) for n in names]
    if reason is None:
        assert p.demand == []
    else:
        assert len(p.demand) == 1 and "not pushed" in p.demand[0] and reason in p.demand[0]
        assert p.demand[0] in render_plan(p)


def test_through_a_stored_recursive_view():
    body = TC + "SELECT X AS boss, Y AS member FROM tc"
    views = {"org_closure": StoredView("default.org_closure", body, ("boss", "member"))}
    p = plan("SELECT member FROM org_closure WHERE boss = 9 ORDER BY member", views)
    assert anchors(p, "org_closure__tc") == ["Src = 9"]
    assert p.demand == ["demand: pushed boss = 9 into the base branches of org_closure__tc"]
    assert "demand: pushed boss = 9" in render_plan(p)


def test_a_view_filtered_on_its_far_end_runs_backwards():
    body = TC + "SELECT X AS boss, Y AS member FROM tc"
    views = {"org_closure": StoredView("default.org_closure", body, ("boss", "member"))}
    p = plan("SELECT boss FROM org_closure WHERE member = 9", views)
    assert anchors(p, "org_closure__tc") == ["Dst = 9"]
    assert "evaluated backwards" in p.demand[0]


@pytest.mark.parametrize("recursive, where, anchor, reversed_rule", [
    ("SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src", "Y = 9", "Dst = 9",
     "SELECT edge.Src, tc.Y FROM tc JOIN edge ON edge.Dst = tc.X"),
    ("SELECT e.Src, tc.Y FROM edge AS e JOIN tc ON e.Dst = tc.X", "X IN (1, 2)", "Src IN (1, 2)",
     "SELECT tc.X, e.Dst FROM tc JOIN edge AS e ON tc.Y = e.Src"),
])
def test_backwards_reverses_a_linear_closure(recursive, where, anchor, reversed_rule):
    sql = (f"WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION {recursive}) "
           f"SELECT * FROM tc WHERE {where}")
    p = plan(sql)
    assert anchors(p, "tc") == [anchor]
    assert reversed_rule in p.demand[0] and "evaluated backwards" in p.demand[0]
    cte = p.steps[0].ctes[0]
    assert cte.recursive_branches[0].bases[0].columns == (anchor.split()[0],)  # joined on it


def test_the_rewritten_ast_is_only_the_anchor():
    sql = TC + "SELECT * FROM tc WHERE X = 9"
    on, off = plan(sql), plan(sql, demand=False)
    on_branches = [b.select for b in on.steps[0].ctes[0].branches]
    off_branches = [b.select for b in off.steps[0].ctes[0].branches]
    assert on_branches[1] == off_branches[1]
    assert on_branches[0] == off_branches[0].copy().where(exp.condition("Src = 9"))


def test_a_filter_on_a_plain_cte_says_nothing():
    p = plan(TC.replace("WITH recursive tc", "WITH recursive n (a) AS (SELECT 1), tc")
             + "SELECT n.a, tc.Y FROM n, tc WHERE n.a = 1 AND tc.X = 2")
    assert p.demand == ["demand: pushed X = 2 into the base branches of tc"]


@pytest.mark.parametrize("final, pushed, shown", [
    # the branches of a final UNION: each keeps its own filter, the recursion holds either's rows
    ("SELECT * FROM tc WHERE X = 1 UNION ALL SELECT * FROM tc WHERE X = 2", "Src = 1 OR Src = 2",
     "demand: pushed X = 1 OR X = 2 into the base branches of tc (for its 2 reads)"),
    ("SELECT Y FROM tc WHERE X > 1 AND X < 5 UNION SELECT Y FROM tc WHERE X = 9 EXCEPT "
     "SELECT Y FROM tc WHERE X IN (3, 4)", "(Src > 1 AND Src < 5) OR Src = 9 OR Src IN (3, 4)",
     "demand: pushed (X > 1 AND X < 5) OR X = 9 OR X IN (3, 4) into the base branches of tc (for its 3 reads)"),
    # one branch reads no recursion: the other's filter is pushed as for one read
    ("SELECT X FROM tc WHERE X = 1 UNION SELECT Src FROM edge WHERE Src = 2", "Src = 1",
     "demand: pushed X = 1 into the base branches of tc"),
    # a self-join, both reads bound on the far end: evaluated backwards from either binding
    ("SELECT a.X FROM tc a JOIN tc b ON a.X = b.X WHERE a.Y = 5 AND b.Y = 7", "Dst = 5 OR Dst = 7",
     "demand: pushed Y = 5 OR Y = 7 into the base branches of tc, evaluated backwards"),
    # the same binding in both reads
    ("SELECT a.X, b.Y FROM tc a, tc b WHERE a.X = 4 AND b.X = 4 AND a.Y = b.Y", "Src = 4 OR Src = 4",
     "demand: pushed X = 4 OR X = 4 into the base branches of tc (for its 2 reads)"),
])
def test_several_reads_each_filtered_on_one_column_push_either_filter(final, pushed, shown):
    p = plan(TC + final)
    assert anchors(p, "tc") == [pushed]
    assert len(p.demand) == 1 and p.demand[0].startswith(shown)
    assert p.demand[0] in render_plan(p)
    assert plan(TC + final, demand=False).demand == []


def test_a_view_read_twice_by_a_union_is_pushed_through_its_projection():
    body = TC + "SELECT X AS boss, Y AS member FROM tc"
    views = {"org_closure": StoredView("default.org_closure", body, ("boss", "member"))}
    p = plan("SELECT boss FROM org_closure WHERE member = 9 UNION "
             "SELECT boss FROM org_closure WHERE member IN (3, 4)", views)
    assert anchors(p, "org_closure__tc") == ["Dst = 9 OR Dst IN (3, 4)"]
    assert p.demand[0].startswith("demand: pushed member = 9 OR member IN (3, 4) into the base "
                                  "branches of org_closure__tc, evaluated backwards")


def steps_of(p) -> list[str]:
    return [c.name for s in p.steps if isinstance(s, GroupStep) for c in s.ctes]


CLOSURE = {"closure": StoredView("default.closure", TC + "SELECT X AS node, Y AS reached FROM tc",
                                 ("node", "reached"))}


@pytest.mark.parametrize("final, views, original, copy", [
    # a self-join bound at both ends: forwards from 1 on the recursion as written, backwards
    # from 7 on a copy of it
    ("SELECT a.Y FROM tc a JOIN tc b ON a.Y = b.X WHERE a.X = 1 AND b.Y = 7", None, "tc", "tc__demand1"),
    ("SELECT a.reached FROM closure a JOIN closure b ON a.reached = b.node "
     "WHERE a.node = 1 AND b.reached = 7", CLOSURE, "closure__tc", "closure__tc__demand1"),
    ("SELECT reached FROM closure WHERE node = 1 UNION SELECT node FROM closure WHERE reached = 7",
     CLOSURE, "closure__tc", "closure__tc__demand1"),
    ("SELECT Y FROM tc WHERE X = 1 INTERSECT SELECT X FROM tc WHERE Y = 7", None, "tc", "tc__demand1"),
    ("SELECT reached FROM closure WHERE node = 1 EXCEPT SELECT node FROM closure WHERE reached = 7",
     CLOSURE, "closure__tc", "closure__tc__demand1"),
])
def test_reads_filtered_on_different_columns_get_their_own_copies(final, views, original, copy):
    p = plan((TC if views is None else "") + final, views)
    assert steps_of(p) == [original, copy]
    assert anchors(p, original) == ["Src = 1"] and anchors(p, copy) == ["Dst = 7"]
    read = "closure" if views else "tc"
    first, second = p.demand
    assert first.startswith(f"demand: pushed {'node' if views else 'X'} = 1 into the base branches "
                            f"of {original} (for {read}'s read 1")
    assert second.startswith(f"demand: pushed {'reached' if views else 'Y'} = 7 into the base "
                             f"branches of {copy}, evaluated backwards")
    assert second.endswith(f"of 2, on its own copy {read}__demand1)")
    assert first in render_plan(p) and second in render_plan(p)
    # the final query is as written but for the second read's source; the copy is the
    # recursion as written under new names
    assert p.final.sql("rasql").count(f"rq_cte_{read}__demand1") == 1
    off = plan((TC if views is None else "") + final, views, demand=False)
    assert steps_of(off) == [original]


def test_a_read_filtered_on_two_columns_shares_the_copy_of_one():
    p = plan(TC + "SELECT Y FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y = 7 "
             "UNION SELECT X FROM tc WHERE Y = 8 AND X < 3")
    # X and Y are each filtered by two reads: the first written (X) keeps the recursion
    assert anchors(p, "tc") == ["Src = 1 OR Src < 3"] and anchors(p, "tc__demand1") == ["Dst = 7"]
    assert p.demand[0].startswith("demand: pushed X = 1 OR X < 3 into the base branches of tc "
                                  "(for tc's reads 1, 3 of 3)")
    assert p.demand[1].endswith("(for tc's read 2 of 3, on its own copy tc__demand1)")


def test_three_bindings_three_recursions():
    p = plan(TC + "SELECT a.X FROM tc a, tc b, tc c WHERE a.X = 1 AND b.Y = 2 AND c.X = 3 AND "
             "a.Y = b.X AND b.Y = c.X")
    assert steps_of(p) == ["tc", "tc__demand1"]  # a and c share the forward recursion
    assert anchors(p, "tc") == ["Src = 1 OR Src = 3"] and anchors(p, "tc__demand1") == ["Dst = 2"]


def test_a_copys_name_does_not_meet_the_users():
    sql = ("WITH recursive tc__demand1 (X) AS (SELECT Src FROM edge), "
           + TC.removeprefix("WITH recursive ")
           + "SELECT a.Y FROM tc a JOIN tc b ON a.Y = b.X, tc__demand2 t WHERE a.X = 1 AND b.Y = 7 "
           "AND t.Src = a.X")
    p = plan(sql.replace(", tc__demand2 t", "").replace(" AND t.Src = a.X", ""))
    assert anchors(p, "tc__demand2") == ["Dst = 7"]
    with pytest.raises(RecSQLAnalysisError) as raised:  # a table of that name is read, not shadowed
        plan(sql)
    assert "TABLE_OR_VIEW_NOT_FOUND" in str(raised.value)
    assert "tc__demand1" in str(raised.value) and "tc__demand3" not in str(raised.value)  # no copy
    p = plan(sql, views={"tc__demand2": StoredView("default.tc__demand2", TC + "SELECT * FROM tc",
                                                   ("Src", "Dst"))})
    assert steps_of(p) == ["tc__demand2__tc", "tc", "tc__demand3"]


ANOTHER = "another read of {} has no filter that can be pushed, so it needs the whole recursion"


@pytest.mark.parametrize("sql, reasons", [
    # the aggregated column cannot be pushed: that read needs the whole recursion
    (APSP + "SELECT a.Dst FROM path a JOIN path b ON a.Dst = b.Dst WHERE a.Src = 1 AND b.Cost < 5",
     ["not pushed Src = 1 into path (for path's read 1 (a) of 2): " + ANOTHER.format("path"),
      "not pushed Cost < 5 into path (for path's read 2 (b) of 2): Cost is aggregated"]),
    # a computed column is neither carried nor reversible
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION SELECT tc.X, edge.Dst + 0 FROM "
     "tc, edge WHERE tc.Y = edge.Src) SELECT Y FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y = 2",
     ["not pushed X = 1 into tc (for tc's read 1 of 2): " + ANOTHER.format("tc"),
      "not pushed Y = 2 into tc (for tc's read 2 of 2): column y is not carried unchanged by "
      "recursive branch 2 (it outputs edge.Dst + 0)"]),
    # non-linear recursion
    ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge UNION SELECT a.X, b.Y FROM tc a, tc b "
     "WHERE a.Y = b.X) SELECT Y FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y = 2",
     ["(for tc's read 1 of 2): branch 2 reads tc 2 times (non-linear recursion is not handled)",
      "(for tc's read 2 of 2): branch 2 reads tc 2 times (non-linear recursion is not handled)"]),
    # mutual recursion
    ("WITH recursive a (X, Y) AS (SELECT Src, Dst FROM edge UNION SELECT b.X, edge.Dst FROM b, edge "
     "WHERE b.Y = edge.Src), b (X, Y) AS (SELECT a.X, a.Y FROM a) "
     "SELECT Y FROM a WHERE X = 1 UNION SELECT X FROM a WHERE Y = 2",
     ["mutually recursive", "mutually recursive"]),
    # a recursion level limit
    ("WITH recursive tc (X, Y) MAX RECURSION LEVEL 50 AS (SELECT Src, Dst FROM edge UNION "
     "SELECT tc.X, edge.Dst FROM tc, edge WHERE tc.Y = edge.Src) "
     "SELECT Y FROM tc WHERE X = 1 UNION SELECT X FROM tc WHERE Y = 2",
     ["recursion level limit", "recursion level limit"]),
    # a read outside the final FROM needs the recursion as written
    (TC + "SELECT a.Y FROM tc a JOIN tc b ON a.Y = b.X WHERE a.X = 1 AND b.Y = 2 "
     "AND a.Y IN (SELECT X FROM tc)",
     ["not pushed X = 1 into tc (for tc's read 1 (a) of 2): tc has 1 other read in the statement",
      "not pushed Y = 2 into tc (for tc's read 2 (b) of 2): " + ANOTHER.format("tc")]),
])
def test_reads_on_different_columns_still_refused_where_unsound(sql, reasons):
    p, off = plan(sql), plan(sql, demand=False)
    assert steps_of(p) == steps_of(off)  # no copy is run
    assert [anchors(p, n) for n in steps_of(p)] == [anchors(off, n) for n in steps_of(off)]
    assert len(p.demand) == len(reasons)
    for note, reason in zip(p.demand, reasons):
        assert note.startswith("demand: not pushed") and reason in note, note
        assert note in render_plan(p)
