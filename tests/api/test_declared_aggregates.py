"""Head aggregates users declare (`CREATE AGGREGATE`, `recsql.register_aggregate`) and Spark's
own lattice aggregates in heads: answers against plain-Python fixpoints on both engines (the
driver endgame, the default, and the Spark loop), in the RaSQL head and in the spelling every
parser accepts (`bor(x) ... GROUP BY`); declarations that break a law, clash with a Spark
function, name a type recsql cannot check, or do not run in DuckDB are refused, and leave
nothing behind; a stored one is found from another session."""

from __future__ import annotations

import random

import pytest

import recsql
from recsql.errors import RecSQLAnalysisError, RecSQLParseError
from tests.conftest import register, rows, setting, unique_name

BOR = "CREATE OR REPLACE TEMPORARY AGGREGATE {name}(a BIGINT, b BIGINT) RETURNS BIGINT IDENTITY 0 RETURN a | b"
HULL = ("CREATE OR REPLACE TEMPORARY AGGREGATE {name}(a STRUCT<lo: INT, hi: INT>, b STRUCT<lo: INT, hi: INT>) "
        "RETURNS STRUCT<lo: INT, hi: INT> IDENTITY named_struct('lo', 2147483647, 'hi', -2147483648) "
        "RETURN named_struct('lo', least(a.lo, b.lo), 'hi', greatest(a.hi, b.hi))")
UNION = ("CREATE OR REPLACE TEMPORARY AGGREGATE {name}(a ARRAY<INT>, b ARRAY<INT>) RETURNS ARRAY<INT> "
         "IDENTITY array() RETURN array_sort(array_distinct(concat(a, b)))")
SMALLEST = ("CREATE OR REPLACE TEMPORARY AGGREGATE {name}(a ARRAY<INT>, b ARRAY<INT>) RETURNS ARRAY<INT> "
            "IDENTITY array() RETURN slice(array_sort(array_distinct(concat(a, b))), 1, 3)")

HEAD = """WITH RECURSIVE r(node, {agg}() AS v) AS (
  SELECT node, {value} FROM {nodes}
  UNION
  SELECT e.dst, r.v FROM r JOIN {edges} e ON r.node = e.src)
SELECT node, v FROM r"""
TERM = """WITH RECURSIVE r(node, v) AS (
  SELECT node, {value} FROM {nodes}
  UNION
  SELECT e.dst, {agg}(r.v) FROM r JOIN {edges} e ON r.node = e.src GROUP BY e.dst)
SELECT node, v FROM r"""


def graph(seed: int, nodes: int = 24, edges: int = 40) -> tuple[list[tuple[int, int]], dict[int, int]]:
    rng = random.Random(seed)
    pairs = sorted({(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)})
    flags = {n: 1 << rng.randrange(12) for n in range(nodes)}
    return pairs, flags


def reached_from(edges: list[tuple[int, int]], nodes: list[int]) -> dict[int, set[int]]:
    """Plain-Python fixpoint: each node -> the nodes it is reached from (itself included)."""
    sources = {n: {n} for n in nodes}
    changed = True
    while changed:
        changed = False
        for s, d in edges:
            if not sources[s] <= sources[d]:
                sources[d] |= sources[s]
                changed = True
    return sources


def or_of_reached(edges: list[tuple[int, int]], flags: dict[int, int]) -> list[tuple[int, int]]:
    """Each node with the bitwise or of the flags of every node it is reached from (the oracle)."""
    expected = []
    for node, sources in reached_from(edges, sorted(flags)).items():
        value = 0
        for s in sources:
            value |= flags[s]
        expected.append((node, value))
    return sorted(expected)


@pytest.fixture(params=["driver endgame", "Spark loop"])
def engine(request, spark):
    with setting(spark, "spark.recsql.endgame.enabled", "true" if request.param == "driver endgame" else "false"):
        yield request.param


@pytest.fixture
def tables(spark):
    edges, flags = graph(7)
    names = unique_name("agg_edges"), unique_name("agg_nodes")
    register(spark, names[0], edges, "src INT, dst INT")
    register(spark, names[1], sorted(flags.items()), "node INT, flag BIGINT")
    return edges, flags, names


# Both spellings plan alike (`test_the_term_spelling_plans_as_the_head`), so the executor runs
# one plan for both: the driver endgame runs both spellings, the Spark loop the head alone.
@pytest.mark.parametrize("engine, form", [
    *(("driver endgame", form) for form in ("declared, head", "declared, term", "bit_or, head", "bit_or, term")),
    *(("Spark loop", form) for form in ("declared, head", "bit_or, head")),
], indirect=["engine"])
def test_bitwise_or_flags_over_a_graph(spark, engine, tables, form):
    edges, flags, (edge_table, node_table) = tables
    agg = unique_name("bor") if form.startswith("declared") else "bit_or"
    if form.startswith("declared"):
        recsql.sql(BOR.format(name=agg), spark=spark)
    query = (HEAD if form.endswith("head") else TERM).format(agg=agg, value="flag", nodes=node_table, edges=edge_table)
    expected = or_of_reached(edges, flags)
    assert rows(recsql.sql(query, spark=spark)) == expected


def test_the_term_spelling_plans_as_the_head(spark, tables):
    """A declared aggregate and Spark's bit_or in a recursive term with GROUP BY plan exactly as
    in the head (no Spark job: plans compared as text)."""
    from recsql.parser import parse_statement
    from recsql.planner import plan_query, render_plan
    from recsql.statements.catalog import SparkCatalog

    _, _, (edge_table, node_table) = tables
    declared = unique_name("bor")
    recsql.sql(BOR.format(name=declared), spark=spark)
    for agg in (declared, "bit_or"):
        head, term = (q.format(agg=agg, value="flag", nodes=node_table, edges=edge_table) for q in (HEAD, TERM))
        assert render_plan(plan_query(parse_statement(term).expression, term, SparkCatalog(spark))) == \
            render_plan(plan_query(parse_statement(head).expression, head, SparkCatalog(spark))), agg


# The Spark loop runs declared aggregates in the default suite through the bitwise OR above; this
# test's three aggregates on it (20 s on 2 cores) run with `-m slow`.
@pytest.mark.parametrize("engine", ["driver endgame", pytest.param("Spark loop", marks=pytest.mark.slow)],
                         indirect=True)
def test_the_hull_of_an_interval_a_set_union_and_the_k_smallest(spark, engine, tables):
    edges, flags, (edge_table, node_table) = tables
    hull, union, smallest = unique_name("hull"), unique_name("uni"), unique_name("smallest")
    recsql.sql(HULL.format(name=hull), spark=spark)
    recsql.sql(UNION.format(name=union), spark=spark)
    recsql.sql(SMALLEST.format(name=smallest), spark=spark)
    reached = reached_from(edges, sorted(flags))
    got = rows(recsql.sql(HEAD.format(agg=hull, value="named_struct('lo', node * 3, 'hi', node * 3 + 1)",
                                      nodes=node_table, edges=edge_table), spark=spark))
    assert [(n, (v.lo, v.hi)) for n, v in got] == sorted(
        (n, (min(s) * 3, max(s) * 3 + 1)) for n, s in reached.items())
    got = rows(recsql.sql(TERM.format(agg=union, value="array(node)", nodes=node_table, edges=edge_table),
                          spark=spark))
    assert [(n, list(v)) for n, v in got] == sorted((n, sorted(s)) for n, s in reached.items())
    got = rows(recsql.sql(HEAD.format(agg=smallest, value="array(node)", nodes=node_table, edges=edge_table),
                          spark=spark))
    assert [(n, list(v)) for n, v in got] == sorted((n, sorted(s)[:3]) for n, s in reached.items())


def test_bool_or_undeclared(spark, tables):
    edges, flags, (edge_table, node_table) = tables
    query = HEAD.format(agg="bool_or", value="node = 3", nodes=node_table, edges=edge_table)
    expected = sorted((n, 3 in s) for n, s in reached_from(edges, sorted(flags)).items())
    assert rows(recsql.sql(query, spark=spark)) == expected


@pytest.mark.parametrize("merge,identity,law,says", [
    ("a + b", "0", "idempotent", "(x, x) = "),
    ("a - b", "0", "commutative", "(y, x) = "),
    ("a | b", "1", "identity", "IDENTITY 1 is not an identity"),
    ("CASE WHEN a > b THEN a - 1 ELSE b END", "-1000000", "commutative", "(y, x) = "),
])
def test_a_merge_that_breaks_a_law_is_refused_and_nothing_is_declared(spark, merge, identity, law, says):
    name = unique_name("bad")
    with pytest.raises(RecSQLAnalysisError) as raised:
        recsql.sql(f"CREATE AGGREGATE {name}(a BIGINT, b BIGINT) RETURNS BIGINT IDENTITY {identity} RETURN {merge}",
                   spark=spark)
    err = raised.value
    assert err.condition == "RECSQL_AGGREGATE_LAW" and law in err.message and says in err.message, err
    assert " for x = " in err.message and "nothing was declared" in err.message
    assert not spark.catalog.functionExists(name)


def test_a_name_spark_already_has_is_refused(spark):
    for name in ("bit_or", "upper"):
        with pytest.raises(RecSQLAnalysisError) as raised:
            recsql.sql(BOR.format(name=name), spark=spark)
        assert raised.value.condition == "RECSQL_AGGREGATE_NAME_TAKEN" and f"`{name}`" in raised.value.message
    assert "sqlFunction" not in (spark.catalog.getFunction("upper").className or "")


def test_types_recsql_cannot_check_or_spark_does_not_know_are_refused(spark):
    with pytest.raises(RecSQLParseError) as raised:
        recsql.sql("CREATE AGGREGATE nosuch(a BIGINTEGER, b BIGINTEGER) RETURNS BIGINTEGER IDENTITY 0 "
                   "RETURN a | b", spark=spark)
    assert "`BIGINTEGER` is not a Spark type" in raised.value.message
    with pytest.raises(RecSQLAnalysisError) as raised:
        recsql.sql("CREATE AGGREGATE mapped(a MAP<INT, INT>, b MAP<INT, INT>) RETURNS MAP<INT, INT> "
                   "IDENTITY map() RETURN map_concat(a, b)", spark=spark)
    assert raised.value.condition == "RECSQL_AGGREGATE_TYPE" and "MAP<INT, INT>" in raised.value.message
    assert not spark.catalog.functionExists("nosuch") and not spark.catalog.functionExists("mapped")


def test_a_merge_duckdb_cannot_run_is_refused(spark):
    """array_union is Spark's alone: the driver endgame could not run the merge."""
    name = unique_name("sorted_union")
    with pytest.raises(RecSQLAnalysisError) as raised:
        recsql.sql(f"CREATE AGGREGATE {name}(a ARRAY<INT>, b ARRAY<INT>) RETURNS ARRAY<INT> IDENTITY array() "
                   "RETURN array_sort(array_union(a, b))", spark=spark)
    assert raised.value.condition == "RECSQL_AGGREGATE_NOT_PORTABLE" and "DuckDB" in raised.value.message
    assert not spark.catalog.functionExists(name)


def test_register_aggregate_from_python_is_the_same_declaration(spark, tables):
    edges, flags, (edge_table, node_table) = tables
    name = unique_name("pybor")
    recsql.register_aggregate(name, "x | y", "0", "BIGINT", parameters=("x", "y"), temporary=True, spark=spark)
    assert spark.sql(f"SELECT {name}(5, 6) AS v").first().v == 7  # kept as a Spark function too
    query = HEAD.format(agg=name, value="flag", nodes=node_table, edges=edge_table)
    assert len(rows(recsql.sql(query, spark=spark))) == len(flags)
    with pytest.raises(RecSQLAnalysisError, match="idempotent"):
        recsql.register_aggregate(unique_name("pyadd"), "a + b", "0", "BIGINT", spark=spark)


def test_a_stored_aggregate_is_found_by_another_session_and_dropped(spark):
    name = unique_name("stored_bor")
    recsql.sql(BOR.format(name=name).replace("OR REPLACE TEMPORARY ", ""), spark=spark)
    try:
        other = spark.newSession()
        edges, flags = graph(3, nodes=10, edges=14)
        register(other, "agg_e", edges, "src INT, dst INT")
        register(other, "agg_n", sorted(flags.items()), "node INT, flag BIGINT")
        got = rows(recsql.sql(HEAD.format(agg=name, value="flag", nodes="agg_n", edges="agg_e"), spark=other))
        expected = or_of_reached(edges, flags)
        assert got == expected
        with pytest.raises(RecSQLAnalysisError) as raised:
            recsql.sql(BOR.format(name=name).replace("OR REPLACE TEMPORARY ", ""), spark=other)
        assert raised.value.condition == "RECSQL_AGGREGATE_ALREADY_EXISTS"
    finally:
        recsql.sql(f"DROP AGGREGATE {name}", spark=spark)
    assert not spark.catalog.functionExists(name)
    with pytest.raises(RecSQLAnalysisError) as raised:
        recsql.sql(f"DROP AGGREGATE {name}", spark=spark)
    assert raised.value.condition == "RECSQL_AGGREGATE_NOT_FOUND"
    recsql.sql(f"DROP AGGREGATE IF EXISTS {name}", spark=spark)


def test_a_permanent_view_over_a_temporary_aggregate_is_kept_for_the_session(spark):
    """Spark refuses a permanent view over a temporary object; recsql keeps it as a temporary
    view of the session (as for a temporary view it reads), and says so."""
    name, view = unique_name("tmp_bor"), unique_name("bits_view")
    edges_table, nodes_table = unique_name("agg_pe"), unique_name("agg_pn")
    edges, flags = graph(5, nodes=8, edges=10)
    spark.createDataFrame(edges, "src INT, dst INT").write.saveAsTable(edges_table)
    spark.createDataFrame(sorted(flags.items()), "node INT, flag BIGINT").write.saveAsTable(nodes_table)
    try:
        recsql.sql(BOR.format(name=name), spark=spark)
        body = HEAD.format(agg=name, value="flag", nodes=nodes_table, edges=edges_table)
        with pytest.warns(UserWarning, match=f"temporary aggregate {name}"):
            recsql.sql(f"CREATE VIEW {view} AS {body}", spark=spark)
        assert spark.catalog.getTable(view).isTemporary
        expected = or_of_reached(edges, flags)
        assert rows(recsql.sql(f"SELECT node, v FROM {view}", spark=spark)) == expected
    finally:
        spark.catalog.dropTempView(view)
        spark.sql(f"DROP TABLE IF EXISTS {edges_table}")
        spark.sql(f"DROP TABLE IF EXISTS {nodes_table}")
