"""Planner tests without Spark: groups, strata, delta rules, partition keys, contributors, checks."""

from __future__ import annotations

import pytest

from recsql.errors import RecSQLAnalysisError, RecSQLParseError
from recsql.parser import parse_statement
from recsql.planner import ALL, DELTA, DictCatalog, GroupStep, ViewStep, plan_query, render_plan

CATALOG = DictCatalog({
    "edge": ["Src", "Dst", "Cost"],
    "report": ["Mgr", "Emp"],
    "sales": ["M", "P"],
    "sponsor": ["M1", "M2"],
    "nodes": ["X"],
    "rel": ["Parent", "Child"],
    "inter": ["S", "E"],
    "lstart": ["T"],
})

SSSP = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
        "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) "
        "SELECT Dst, Cost FROM path")


def plan(q, catalog=CATALOG):
    return plan_query(parse_statement(q).expression, q, catalog)


def analysis_error(q, catalog=CATALOG) -> RecSQLAnalysisError:
    with pytest.raises(RecSQLAnalysisError) as info:
        plan(q, catalog)
    return info.value


# ---------------------------------------------------------------------------------- structure

def test_sssp_plan_keys_and_bases():
    p = plan(SSSP)
    assert p.recursive
    (group,) = p.groups
    (cte,) = group.ctes
    assert cte.name == "path"
    assert cte.group_key == ["Dst"] and cte.partition_key == ["Dst"]
    assert [(c.name, c.agg) for c in cte.aggregates] == [("Cost", "min")]
    assert not cte.bag and not cte.summing
    assert len(cte.base_branches) == 1 and len(cte.recursive_branches) == 1
    rec = cte.recursive_branches[0]
    assert rec.variants == ((DELTA,),)
    assert [(b.table.parts, b.columns) for b in rec.bases] == [(("edge",), ("Src",))]
    text = render_plan(p)
    assert "group key / partition key: (Dst)" in text
    assert "aggregated columns: min(Cost)" in text
    assert "base edge pre-partitioned by (Src)" in text


def test_base_joins_recorded_for_the_executor():
    # each base records which references join it on its partition columns, with the reference's
    # head columns in the base's column order (the executor's strategies never re-read the SQL)
    (cte,) = plan(SSSP).groups[0].ctes
    (rec,) = cte.recursive_branches
    (ref,) = rec.refs
    assert [(j.ref, j.columns) for j in rec.bases[0].joins] == [(ref.binding, ("Dst",))]
    # written in the other order, paired in the base's column order
    q = ("WITH recursive r (A, B) AS (SELECT Src, Dst FROM edge) UNION "
         "(SELECT e.Dst, e.Src FROM r, edge e WHERE r.b = e.Dst AND r.a = e.Src) SELECT * FROM r")
    (rec,) = plan(q).groups[0].ctes[0].recursive_branches
    assert [(b.columns, [j.columns for j in b.joins]) for b in rec.bases] == [(("Src", "Dst"), [("A", "B")])]


def test_base_branch_reads_the_pre_partitioned_table():
    # the statement shuffles `edge` once: the base step reads the copy the iterations join
    q = ("WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM edge) UNION "
         "(SELECT edge.Dst, cc.C FROM cc, edge WHERE cc.X = edge.Src) SELECT X, C FROM cc")
    (base,) = plan(q).groups[0].ctes[0].base_branches
    assert [(str(b.table), b.columns, b.joins) for b in base.bases] == [("edge", ("Src",), ())]
    assert "{rq_base_0} AS `edge`" in base.select.sql("rasql")
    # only the table a recursive branch joins, and not a local CTE of its name or a sampled read
    cases = {"SELECT Src, 0 FROM report r JOIN edge ON r.Mgr = edge.Src": {"edge"},
             "WITH edge AS (SELECT 1 AS Src) SELECT Src, Src FROM edge": set(),
             "SELECT Src, Src FROM edge TABLESAMPLE (50 PERCENT)": set()}
    for anchor, bound in cases.items():
        (base,) = plan(q.replace("SELECT Src, Src FROM edge", anchor)).groups[0].ctes[0].base_branches
        assert {str(b.table) for b in base.bases} == bound, anchor


KEYS_ONLY_CC = ("WITH recursive cc (X, min() AS C) AS (SELECT Src, Src FROM edge) UNION "
                "(SELECT edge.Dst, cc.C FROM cc, edge WHERE cc.X = edge.Src) SELECT X, C FROM cc")


@pytest.mark.parametrize("query, keys_only", [
    (KEYS_ONLY_CC, True),
    # a max(), an expression and a filter over the key alone, DISTINCT, the table's name as alias
    (KEYS_ONLY_CC.replace("min()", "max()"), True),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT e.Src, e.src * 2 FROM edge e WHERE Src > 3"), True),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT DISTINCT edge.Src, 0 FROM edge"), True),
    # a set relation: distinct rows
    ("WITH recursive r (A, B) AS (SELECT Src, Src FROM edge) UNION "
     "(SELECT edge.Dst, r.B FROM r, edge WHERE r.A = edge.Src) SELECT * FROM r", True),
    # a row's multiplicity counts: a sum/count head, UNION ALL
    (KEYS_ONLY_CC.replace("min()", "sum()"), False),
    (KEYS_ONLY_CC.replace("min()", "count()"), False),
    ("WITH recursive r (A, B) AS (SELECT Src, Src FROM edge) UNION ALL "
     "(SELECT edge.Dst, r.B FROM r, edge WHERE r.A = edge.Src AND r.B < 3) SELECT * FROM r", False),
    # another column of the table, in SELECT or WHERE, or any column at all (a star)
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Dst FROM edge"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src FROM edge WHERE Cost > 1"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src FROM edge WHERE edge.Dst = 1"), False),
    ("WITH recursive r (A, B, C) AS (SELECT * FROM edge) UNION "
     "(SELECT edge.Dst, r.B, r.C FROM r, edge WHERE r.A = edge.Src) SELECT * FROM r", False),
    # not row by row, not deterministic, or reading something else
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, count(*) FROM edge GROUP BY Src"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src FROM edge LIMIT 3"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge",
                          "SELECT Src, row_number() OVER (ORDER BY Src) FROM edge"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src + CAST(rand(1) * 9 AS INT) FROM edge"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, my_udf(Src) FROM edge"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge",
                          "SELECT Src, Src FROM edge WHERE Src IN (SELECT X FROM nodes)"), False),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge",
                          "SELECT e.Src, e.Src FROM edge e JOIN nodes n ON e.Src = n.X"), False),
])
def test_a_base_branch_over_the_copys_keys_alone_is_recorded(query, keys_only):
    # the executor binds one row per key (the adjacency index's keys) only where that gives the
    # same relation: the branch reads the partition columns alone, row by row, into a relation
    # that keeps no row's multiplicity
    (base,) = plan(query).groups[0].ctes[0].base_branches
    assert [b.keys_only for b in base.bases] == [keys_only], query
    assert ("its distinct keys alone" in render_plan(plan(query))) == keys_only


def test_recursive_branch_reads_aliased_or_sampled_tables_as_written():
    # the partitioned copy is of the bare table: column aliases (or a sample) would be lost
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
         "(SELECT e.d, path.Cost + e.c FROM path, edge AS e(s, d, c) WHERE path.Dst = e.s) "
         "SELECT Dst, Cost FROM path")
    for read in ["edge AS e(s, d, c)", "(SELECT Src AS s, Dst AS d, Cost AS c FROM edge "
                 "TABLESAMPLE (50 PERCENT)) AS e", "edge AS e"]:
        text = q.replace("edge AS e(s, d, c)", read)
        if read == "edge AS e":
            text = text.replace("e.d", "e.Dst").replace("e.c", "e.Cost").replace("e.s", "e.Src")
        (branch,) = plan(text).groups[0].ctes[0].recursive_branches
        assert [str(b.table) for b in branch.bases] == (["edge"] if read == "edge AS e" else []), read


def test_no_recursion_no_aggregate_goes_to_spark():
    assert plan("WITH a AS (SELECT Src FROM edge) SELECT * FROM a") is None
    assert plan("SELECT * FROM edge") is None


def test_head_aggregate_without_recursion_is_planned():
    p = plan("WITH a (Src, max() AS C) AS (SELECT Src, Cost FROM edge) SELECT * FROM a")
    (group,) = p.groups
    assert not group.recursive
    assert group.ctes[0].aggregates[0].agg == "max"


@pytest.mark.parametrize("spelling,canonical", [
    ("min()", "min"), ("mmin", "min"), ("max()", "max"), ("mmax()", "max"),
    ("sum()", "sum"), ("msum", "sum"), ("count()", "count"), ("mcount", "count"),
    ("MIN()", "min"),
])
def test_aggregate_spellings_canonicalised(spelling, canonical):
    q = (f"WITH recursive r (Dst, {spelling} AS V) AS (SELECT 1, 1) UNION "
         "(SELECT edge.Dst, r.V FROM r, edge WHERE r.Dst = edge.Src) SELECT * FROM r")
    cte = plan(q).groups[0].ctes[0]
    assert cte.aggregates[0].agg == canonical
    assert cte.summing == (canonical in ("sum", "count"))


def test_nonlinear_tc_has_one_delta_variant_per_reference():
    q = ("WITH RECURSIVE tc (X, Y) AS (SELECT Src, Dst FROM edge UNION "
         "SELECT t1.X, t2.Y FROM tc AS t1 JOIN tc AS t2 ON t1.Y = t2.X) SELECT count(*) FROM tc")
    cte = plan(q).groups[0].ctes[0]
    rec = cte.recursive_branches[0]
    assert len(rec.refs) == 2
    assert set(rec.variants) == {(DELTA, ALL), (ALL, DELTA)}
    assert "delta rule 2" in render_plan(plan(q))


def test_mutual_recursion_is_one_group():
    q = ("WITH RECURSIVE even (X) AS (SELECT 1) UNION "
         "(SELECT edge.Dst FROM odd, edge WHERE odd.X = edge.Src), "
         "odd (X) AS (SELECT edge.Dst FROM even, edge WHERE even.X = edge.Src) "
         "SELECT X FROM even")
    p = plan(q)
    assert len(p.groups) == 1
    assert sorted(p.groups[0].names) == ["even", "odd"]
    odd = next(c for c in p.groups[0].ctes if c.name == "odd")
    assert odd.base_branches == []  # its base comes through even


def test_strata_order_recursion_then_negation():
    q = ("WITH RECURSIVE reach (X) AS (SELECT 1 UNION SELECT edge.Dst FROM reach JOIN edge "
         "ON reach.X = edge.Src), unreached (X) AS (SELECT n.X FROM nodes AS n WHERE NOT "
         "EXISTS (SELECT 1 FROM reach AS r WHERE r.X = n.X)) SELECT X FROM unreached")
    p = plan(q)
    assert [type(s) for s in p.steps] == [GroupStep, ViewStep]
    assert p.steps[0].stratum < p.steps[1].stratum


def test_cte_order_in_with_does_not_matter():
    q = ("WITH RECURSIVE later (X) AS (SELECT X FROM reach WHERE X > 2), "
         "reach (X) AS (SELECT 1 UNION SELECT edge.Dst FROM reach, edge WHERE reach.X = edge.Src) "
         "SELECT * FROM later")
    p = plan(q)
    names = [s.name if isinstance(s, ViewStep) else s.names[0] for s in p.steps]
    assert names.index("reach") < names.index("later")


def test_union_all_is_bag():
    q = "WITH RECURSIVE c (N) AS (SELECT 1 UNION ALL SELECT N + 1 FROM c WHERE N < 5) SELECT * FROM c"
    cte = plan(q).groups[0].ctes[0]
    assert cte.bag
    assert "bag (UNION ALL)" in render_plan(plan(q))


def test_column_list_optional_names_from_first_branch():
    q = ("WITH RECURSIVE r AS (SELECT Src AS A, Dst AS B FROM edge UNION "
         "SELECT r.A, edge.Dst FROM r, edge WHERE r.B = edge.Src) SELECT * FROM r")
    assert plan(q).groups[0].ctes[0].columns == ["A", "B"]


def test_sum_contributors():
    q = ("WITH recursive bonus(M, sum() as B) AS (SELECT M, P * 0.1 FROM sales) UNION "
         "(SELECT sponsor.M1, bonus.B * 0.5 FROM bonus, sponsor WHERE bonus.M = sponsor.M2) "
         "SELECT M, B FROM bonus")
    cte = plan(q).groups[0].ctes[0]
    base, rec = cte.branches
    assert len(base.contributor) == 2  # the whole base row
    assert [e.name for e in rec.contributor] == ["M"]  # the group key of the recursive row


def test_parameters_are_collected():
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT :src, 0) UNION "
         "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src "
         "AND edge.Cost < :cap) SELECT Dst, Cost FROM path")
    assert plan(q).parameters == {"src", "cap"}


def test_several_aggregates_in_one_head():
    q = ("WITH RECURSIVE r (Dst, min() AS Lo, max() AS Hi) AS (SELECT 1, 0, 0) UNION "
         "(SELECT edge.Dst, r.Lo + edge.Cost, r.Hi + edge.Cost FROM r, edge WHERE r.Dst = edge.Src) "
         "SELECT * FROM r")
    cte = plan(q).groups[0].ctes[0]
    assert cte.group_key == ["Dst"]
    assert [(c.name, c.agg) for c in cte.aggregates] == [("Lo", "min"), ("Hi", "max")]


def test_group_key_of_three_way_join_same_generation():
    q = ("WITH recursive sg (X, Y) AS (SELECT a.Child, b.Child FROM rel a, rel b "
         "WHERE a.Parent = b.Parent AND a.Child <> b.Child) UNION (SELECT a.Child, b.Child "
         "FROM rel a, sg, rel b WHERE a.Parent = sg.X AND b.Parent = sg.Y) SELECT X, Y FROM sg")
    cte = plan(q).groups[0].ctes[0]
    assert cte.group_key == ["X", "Y"]
    assert len(cte.recursive_branches[0].refs) == 1


# ---------------------------------------------------------------------------------- checks

def test_unknown_table_with_suggestion():
    q = SSSP.replace("path, edge WHERE", "path, edges WHERE")
    err = analysis_error(q)
    assert err.condition == "TABLE_OR_VIEW_NOT_FOUND"
    assert "`edges`" in err.message and "`edge`" in err.message
    assert err.line == 1 and err.pos == q.index("edges")


def test_unknown_column_of_recursive_reference_with_suggestion():
    q = SSSP.replace("path.Cost + edge.Cost", "path.Cst + edge.Cost")
    err = analysis_error(q)
    assert err.condition == "RECSQL_UNKNOWN_COLUMN"
    assert "`Cst`" in err.message and "`Cost`" in err.message
    start = q.index("path.Cst")
    assert start <= err.pos <= start + len("path.")  # the qualified column or its name


def test_head_branch_mismatch_names_branch_and_columns():
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0, 7) UNION "
         "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) "
         "SELECT Dst, Cost FROM path")
    err = analysis_error(q)
    assert err.condition == "RECSQL_HEAD_BRANCH_MISMATCH"
    assert "Branch 1" in err.message and "3 column" in err.message and "has 2" in err.message


@pytest.mark.parametrize("func", ["avg", "stddev", "my_udf"])
def test_unsupported_head_aggregate(func):
    q = SSSP.replace("min()", f"{func}()")
    err = analysis_error(q)
    assert err.condition == "RECSQL_UNSUPPORTED_HEAD_AGGREGATE"
    assert f"`{func}()`" in err.message and "pre-mappable" in err.message
    assert err.pos == q.index(f"{func}()")


@pytest.mark.parametrize("key", ["path.Cost", "Cost"])  # unqualified: was a KeyError (fuzz)
def test_aggregated_column_as_join_key(key):
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
         f"(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE {key} = edge.Src) "
         "SELECT Dst, Cost FROM path")
    err = analysis_error(q)
    assert err.condition == "RECSQL_AGGREGATE_AS_KEY"
    assert f"`{key}` is an aggregated or payload column of `path`" in err.message and "rule 1" in err.message
    start = q.index(f"{key} =")
    assert start <= err.pos <= start + len("path.")


@pytest.mark.parametrize("key", ["path.Cost", "Cost"])
def test_aggregated_column_feeding_group_key(key):
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
         f"(SELECT {key}, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) "
         "SELECT Dst, Cost FROM path")
    err = analysis_error(q)
    assert err.condition == "RECSQL_AGGREGATE_AS_KEY"
    assert f"`{key}` is an aggregated or payload column of `path`" in err.message


def test_aggregated_column_in_non_equi_condition_is_fine():
    q = ("WITH recursive coal (S, max() AS E) AS (SELECT lstart.T, inter.E FROM lstart, inter "
         "WHERE lstart.T = inter.S) UNION (SELECT coal.S, inter.E FROM coal, inter "
         "WHERE coal.S <= inter.S AND inter.S <= coal.E) SELECT S, E FROM coal")
    assert plan(q).groups[0].ctes[0].aggregates[0].agg == "max"


@pytest.mark.parametrize("branch,what", [
    ("SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src LIMIT 5", "LIMIT"),
    ("SELECT edge.Dst, row_number() OVER (ORDER BY edge.Dst) FROM path, edge WHERE path.Dst = edge.Src", "window"),
])
def test_forbidden_in_recursive_branch(branch, what):
    q = f"WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION ({branch}) SELECT Dst, Cost FROM path"
    err = analysis_error(q)
    assert err.condition == "RECSQL_FORBIDDEN_IN_RECURSION"
    assert what in err.message
    assert err.line == 1 and err.pos is not None


def test_negation_over_own_group_rejected():
    q = ("WITH RECURSIVE r (X) AS (SELECT 1 UNION SELECT edge.Dst FROM r, edge WHERE r.X = edge.Src "
         "AND NOT EXISTS (SELECT 1 FROM r AS r2 WHERE r2.X = edge.Dst + 100)) SELECT * FROM r")
    err = analysis_error(q)
    assert err.condition == "RECSQL_NONMONOTONE_NEGATION"
    assert "not monotone" in err.message


@pytest.mark.parametrize("union", ["UNION", "UNION ALL"])
def test_except_over_own_group_only_under_union_all(union):
    """Under UNION ALL a step's EXCEPT reads the previous step's rows only, as Spark evaluates it;
    under UNION it would negate the growing fixpoint."""
    q = (f"WITH RECURSIVE foo(i) AS (SELECT 1 {union} (SELECT i + 1 FROM foo WHERE i < 10 "
         "EXCEPT SELECT i + 1 FROM foo WHERE i < 5)) SELECT * FROM foo")
    if union == "UNION":
        assert analysis_error(q).condition == "RECSQL_NONMONOTONE_NEGATION"
    else:
        assert plan(q) is not None


def test_negation_over_completed_cte_allowed():
    q = ("WITH RECURSIVE reach (X) AS (SELECT 1 UNION SELECT edge.Dst FROM reach, edge WHERE reach.X = edge.Src), "
         "other (X) AS (SELECT 2 UNION SELECT edge.Dst FROM other, edge WHERE other.X = edge.Src "
         "AND NOT EXISTS (SELECT 1 FROM reach WHERE reach.X = edge.Dst)) SELECT * FROM other")
    p = plan(q)
    assert len(p.groups) == 2
    assert p.groups[0].stratum < p.groups[1].stratum


def test_head_aggregate_with_union_all_rejected():
    q = SSSP.replace(") UNION (", ") UNION ALL (")
    assert analysis_error(q).condition == "RECSQL_AGGREGATE_WITH_UNION_ALL"


def test_no_base_branch_rejected():
    q = ("WITH RECURSIVE r (X) AS (SELECT edge.Dst FROM r, edge WHERE r.X = edge.Src) SELECT * FROM r")
    assert analysis_error(q).condition == "RECSQL_NO_BASE_BRANCH"


def test_duplicate_cte_rejected():
    q = "WITH RECURSIVE a (X) AS (SELECT 1 UNION SELECT X + 1 FROM a WHERE X < 3), A (X) AS (SELECT 2) SELECT * FROM a"
    assert analysis_error(q).condition == "RECSQL_DUPLICATE_CTE"


def test_nonlinear_union_all_reads_the_previous_step_on_both_sides():
    # as Spark: under UNION ALL every reference reads the previous step's rows (one delta rule)
    q = ("WITH RECURSIVE tc (X, Y) AS (SELECT Src, Dst FROM edge UNION ALL "
         "SELECT t1.X, t2.Y FROM tc AS t1 JOIN tc AS t2 ON t1.Y = t2.X) SELECT * FROM tc")
    (step,) = [s for s in plan(q).steps if isinstance(s, GroupStep)]
    assert step.ctes[0].branches[1].variants == ((DELTA, DELTA),)


def test_errors_render_caret_under_the_position():
    q = ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)\n"
         "UNION (SELECT edge.Dst, path.Cost + edge.Cost\n"
         "       FROM path, edgez WHERE path.Dst = edge.Src)\n"
         "SELECT Dst, Cost FROM path")
    err = analysis_error(q).with_sql(q)
    assert err.line == 3 and err.pos == q.splitlines()[2].index("edgez")
    text = str(err)
    lines = text.splitlines()
    caret = lines[lines.index("       FROM path, edgez WHERE path.Dst = edge.Src)") + 1]
    assert caret.startswith("-" * err.pos + "^")


COUNTER = "WITH RECURSIVE r(level) AS (VALUES (0) UNION {kind} SELECT level + 1 FROM r) "


@pytest.mark.parametrize("final, kind, target", [
    ("SELECT * FROM r LIMIT 10", "ALL", 10),
    ("SELECT level, level FROM r LIMIT 10 OFFSET 5", "ALL", 15),
    ("SELECT * FROM r ORDER BY level LIMIT 10", "ALL", None),   # needs every row first
    ("SELECT * FROM r WHERE level > 3 LIMIT 10", "ALL", None),  # Spark does not push it either
    ("SELECT count(*) FROM r LIMIT 10", "ALL", None),
    ("SELECT * FROM r LIMIT 10", "", None),                     # UNION: the fixpoint decides
])
def test_limit_ends_union_all_recursion_only_where_spark_pushes_it(final, kind, target):
    groups = [s for s in plan(COUNTER.format(kind=kind) + final).steps if isinstance(s, GroupStep)]
    assert [g.row_target for g in groups] == [target]


@pytest.mark.parametrize("query, names", [
    ("WITH RECURSIVE f AS (VALUES (0, 1) AS t(a, b) UNION ALL SELECT b, a + b FROM f WHERE a < 9) "
     "SELECT * FROM f", ["a", "b"]),
    ("WITH RECURSIVE f AS (VALUES (0, 1) UNION ALL SELECT col2, col1 + col2 FROM f WHERE col1 < 9) "
     "SELECT * FROM f", ["col1", "col2"]),
    ("WITH RECURSIVE s AS (SELECT 1 AS n), r AS (SELECT * FROM s UNION ALL SELECT n + 1 FROM r "
     "WHERE n < 5) SELECT * FROM r", ["n"]),
    ("WITH RECURSIVE r AS (SELECT e.* FROM edge e WHERE e.Src = 1 UNION ALL SELECT edge.Src, edge.Dst, "
     "edge.Cost FROM r JOIN edge ON r.Dst = edge.Src) SELECT * FROM r", ["Src", "Dst", "Cost"]),
])
def test_head_names_come_from_the_anchor_as_in_spark(query, names):
    groups = [s for s in plan(query).steps if isinstance(s, GroupStep)]
    assert [c.name for c in groups[-1].ctes[0].head] == names


# ---------------------------------------------------------------------------------- payload

PAYLOAD = ("WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred) AS (SELECT 1, 0, 1) UNION "
           "(SELECT edge.Dst, path.Cost + edge.Cost, edge.Src FROM path, edge WHERE path.Dst = edge.Src) "
           "SELECT Dst, Cost, Pred FROM path")


def test_payload_is_neither_key_nor_aggregate():
    cte = plan(PAYLOAD).groups[0].ctes[0]
    assert cte.group_key == ["Dst"] == cte.partition_key
    assert [c.name for c in cte.aggregates] == ["Cost"]
    assert [c.name for c in cte.payload(cte.aggregates[0])] == ["Pred"]
    assert "min(Cost) with payload (Pred)" in render_plan(plan(PAYLOAD))


@pytest.mark.parametrize("head, says", [
    ("sum() AS Cost, argmin(Cost) AS Pred", "not supported in a head with `sum() AS Cost`"),
    ("count() AS Cost, argmax(Cost) AS Pred", "not one winning derivation"),
    ("min() AS Cost, argmax(Cost) AS Pred", "write `argmin(Cost) AS Pred`"),
    ("min() AS Cost, argmin(Cst) AS Pred", "no column `Cst`. Did you mean `Cost`"),
    ("min() AS Cost, argmin(Dst) AS Pred", "`Dst` is a group-key column"),
    ("min() AS Cost, argmin() AS Pred", "must name the min() or max() column"),
])
def test_invalid_payload(head, says):
    q = PAYLOAD.replace("min() AS Cost, argmin(Cost) AS Pred", head)
    err = analysis_error(q)
    assert err.condition == "RECSQL_INVALID_PAYLOAD"
    assert says in err.message
    assert err.line == 1 and err.pos == q.index("arg")


def test_payload_beside_a_sum_is_rejected():
    q = PAYLOAD.replace("argmin(Cost) AS Pred", "argmin(Cost) AS Pred, sum() AS N").replace(
        "SELECT 1, 0, 1", "SELECT 1, 0, 1, 1").replace("edge.Src FROM", "edge.Src, 1 FROM")
    err = analysis_error(q)
    assert err.condition == "RECSQL_INVALID_PAYLOAD" and "sum() AS N" in err.message
    assert err.pos == q.index("argmin")


@pytest.mark.parametrize("branch", [
    "SELECT edge.Dst, path.Cost + edge.Cost, edge.Src FROM path, edge WHERE path.Pred = edge.Src",
    "SELECT path.Pred, path.Cost + edge.Cost, edge.Src FROM path, edge WHERE path.Dst = edge.Src",
])
def test_payload_column_is_never_a_key(branch):
    """A payload changes with its winner, like the aggregate it follows (rule 1)."""
    q = PAYLOAD.replace("SELECT edge.Dst, path.Cost + edge.Cost, edge.Src FROM path, edge "
                        "WHERE path.Dst = edge.Src", branch)
    err = analysis_error(q)
    assert err.condition == "RECSQL_AGGREGATE_AS_KEY" and "path.Pred" in err.message


def test_payload_outside_a_cte_head_is_a_parse_error():
    from recsql.errors import RecSQLParseError

    with pytest.raises(RecSQLParseError, match="argmin\\(Cost\\) AS Pred"):
        parse_statement("SELECT * FROM edge AS e(argmin(Cost) AS Pred)")


def test_a_union_branch_that_is_not_a_query_is_a_located_syntax_error():
    """`(1 UNION SELECT ...)` parses as an expression whose first branch is a literal (found by
    the fuzz campaign: it reached the planner as an AttributeError)."""
    q = "WITH RECURSIVE r (X) AS (1 UNION SELECT edge.Dst FROM r, edge WHERE r.X = edge.Src)\nSELECT X FROM r"
    with pytest.raises(RecSQLParseError) as info:
        plan(q)
    assert info.value.condition == "PARSE_SYNTAX_ERROR"
    assert (info.value.line, info.value.pos) == (1, 25)
    assert "branch 1 of CTE `r`" in str(info.value)


@pytest.mark.parametrize("q, at", [
    ("WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x WHERE n < 5 FOR UPDATE) "
     "SELECT * FROM x", "FOR UPDATE"),
    ("WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL\nSELECT n + 1 FROM x WHERE n < 5 for  share) "
     "SELECT * FROM x", "for  share"),
    ("WITH RECURSIVE x(n) AS (SELECT 1 FOR UPDATE UNION ALL SELECT n + 1 FROM x WHERE n < 5) "
     "SELECT * FROM x", "FOR UPDATE"),
])
def test_a_clause_recsql_does_not_implement_is_refused_not_dropped(q, at):
    """PostgreSQL's with.sql: `SELECT n+1 FROM x FOR UPDATE` in a recursive term. sqlglot parses
    the locking read and Spark's SQL has none: dropping it silently answered a query the user
    did not write."""
    err = analysis_error(q)
    assert err.condition == "RECSQL_UNSUPPORTED_CLAUSE"
    assert "not implemented" in err.message and "FOR UPDATE" in err.message
    line = q.split("\n")[err.line - 1]
    assert line[err.pos: err.pos + err.length] == at


@pytest.mark.parametrize("term", ["SELECT count(*) FROM x", "SELECT sum(n) FROM x",
                                  "SELECT max(n) + 1 FROM x WHERE n < 5", "SELECT count(*) FROM x AS y, x AS z"])
def test_a_union_all_term_that_yields_a_row_every_step_is_refused(term):
    """A global aggregate of the previous step yields one row whatever the rows: the recursion
    never ends (Spark and PostgreSQL refuse it at once; recsql ran it to the level limit)."""
    q = f"WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL {term}) SELECT * FROM x"
    err = analysis_error(q)
    assert err.condition == "RECSQL_RECURSION_NEVER_ENDS"
    assert "never ends" in err.message and "branch 2 of CTE `x`" in err.message
    assert q[err.pos:].lower().startswith(("count(", "sum(", "max("))


@pytest.mark.parametrize("q", [
    "WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT count(*) FROM x) SELECT * FROM x LIMIT 4",
    "WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT sum(n) + 1 FROM x HAVING sum(n) < 4) SELECT * FROM x",
    "WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT c FROM (SELECT count(*) + n AS c FROM x GROUP BY n) "
    "WHERE c < 4) SELECT * FROM x",
    "WITH RECURSIVE x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x GROUP BY n HAVING n < 4) SELECT * FROM x",
])
def test_a_union_all_term_that_may_end_is_planned(q):
    assert plan(q) is not None


@pytest.mark.parametrize("select, called", [
    ("SELECT Src + CAST(rand(1) * 9 AS INT) FROM edge", "rand"),
    ("SELECT uuid() FROM edge", "uuid"),
    ("SELECT Src FROM edge WHERE current_timestamp() > '2020-01-01'", "current_timestamp"),
    ("SELECT abs(Src), Src % 3 FROM edge", None),
])
def test_non_deterministic_calls_are_named(select, called):
    # what keeps a base branch off its copy's keys, and a materialized view off its incremental
    # refresh
    from recsql.planner.seeds import non_deterministic

    assert non_deterministic(parse_statement(select).expression) == called


@pytest.mark.parametrize("query, sources", [
    (KEYS_ONLY_CC, (("Src", "Dst"),)),
    (KEYS_ONLY_CC.replace("min()", "max()"), (("Src", "Dst"),)),
    # the head's key second
    ("WITH recursive cc (min() AS C, X) AS (SELECT Src, Src FROM edge) UNION "
     "(SELECT cc.C, edge.Dst FROM cc, edge WHERE cc.X = edge.Src) SELECT X, C FROM cc", (("Src", "Dst"),)),
    # a base row whose value is not its key, or not every key a group: no bound
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src + 1 FROM edge"), None),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Src FROM edge WHERE Src > 3"), None),
    (KEYS_ONLY_CC.replace("SELECT Src, Src FROM edge", "SELECT Src, Dst FROM edge"), None),
    # not an extremum
    (KEYS_ONLY_CC.replace("min()", "sum()"), None),
    # the recursive branch's key is not a column of the copy
    (KEYS_ONLY_CC.replace("SELECT edge.Dst, cc.C", "SELECT edge.Dst + 0, cc.C"), None),
    (KEYS_ONLY_CC.replace("SELECT edge.Dst, cc.C", "SELECT cc.X, cc.C"), None),
])
def test_the_key_bound_is_recorded_where_the_base_step_bounds_every_group_by_its_key(query, sources):
    # the executor drops a candidate (x, v) with v >= x (min) only where every group the base
    # step makes is (a, a) and x is read from the copy whose keys those are (`KeyBound`)
    bound = plan(query).groups[0].ctes[0].key_bound
    if sources is None:
        assert bound is None, query
    else:
        assert (bound.column, bound.extremum) == ("Src", "max" if "max()" in query else "min")
        assert tuple((bound.column, s) for _, s in bound.sources) == sources


@pytest.mark.parametrize("query, witnesses", [
    (KEYS_ONLY_CC, (2,)),
    (KEYS_ONLY_CC.replace("FROM cc, edge WHERE cc.X = edge.Src", "FROM cc JOIN edge ON edge.Src = cc.X"), (2,)),
    # a condition besides the join, or a clause that drops rows: some rows make no candidate
    (KEYS_ONLY_CC.replace("cc.X = edge.Src", "cc.X = edge.Src AND edge.Cost > 0"), ()),
    (KEYS_ONLY_CC.replace("SELECT edge.Dst", "SELECT DISTINCT edge.Dst"), ()),
])
def test_the_key_bound_knows_the_branches_whose_first_iteration_tells_the_fact(query, witnesses):
    # a witness makes a candidate for every row of the copy in the first iteration, so that its
    # groups show whether every Dst is a Src (`KeyBound.witnesses`)
    bound = plan(query).groups[0].ctes[0].key_bound
    assert bound is not None and bound.witnesses == witnesses, query
