"""Plain branches typed without a Spark analysis (`plain_types`), checked against Spark's own
analysis of the same text; and statements with bad branches, whose errors are those recsql gave
before the fast path (written down from main at c07a958)."""

from __future__ import annotations

import random

import pytest
from pyspark.errors import AnalysisException
from sqlglot import parse_one

import recsql
from recsql import RecSQLError
from recsql.executor.analysis import stage as analysis
from recsql.executor.analysis.plain_types import plain_types
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs, render

# view -> schema; `q` shares names with `p` (ambiguity), `dup` has `a` and `A`
VIEWS = {
    "pt_p": "i int, b bigint, s string, d double, m decimal(10,2), dt date, f boolean, "
            "fl float, sh smallint, mp map<string,int>, arr array<int>, st struct<x:int>",
    "pt_q": "i int, K bigint, s string, flag boolean, dt date, Name string",
    "pt_dup": "a int, A bigint",
    "pt_dotless": "`id` int, `\u0131d` bigint",  # a non-ASCII name: its case folding is left to Spark
}


@pytest.fixture(scope="module", autouse=True)
def views(spark):
    for name, schema in VIEWS.items():
        spark.createDataFrame([], schema).createOrReplaceTempView(name)
    spark.sql("SELECT 'a' COLLATE UTF8_LCASE AS c, 'b' AS s").createOrReplaceTempView("pt_coll")
    spark.sql("CREATE TABLE pt_chars (Src INT, Dst INT, label VARCHAR(5), code CHAR(2)) USING parquet")
    spark.sql("INSERT INTO pt_chars VALUES (1, 2, 'a', 'x'), (2, 3, 'b', 'y')")
    yield
    for name in [*VIEWS, "pt_coll"]:
        spark.catalog.dropTempView(name)
    spark.sql("DROP TABLE pt_chars")


@pytest.fixture(params=["false", "true"])
def case_sensitive(request, spark):
    before = spark.conf.get("spark.sql.caseSensitive")
    spark.conf.set("spark.sql.caseSensitive", request.param)
    yield request.param == "true"
    spark.conf.set("spark.sql.caseSensitive", before)


def fast(spark, sql: str):
    """`plain_types` of `sql`, whose `{pt_x}` placeholders are the views."""
    select = parse_one(sql, read="rasql")
    return plain_types(select, lambda t: spark.table(t.this.name).schema,
                       lambda: spark.conf.get("spark.sql.caseSensitive") == "true")


def analysed(spark, sql: str):
    """Spark's types of the same text, as `analysis._typed_branch` spells it; None on an
    analysis error."""
    text = render(parse_one(sql, read="rasql"), escape_braces=True)
    text = text.format(**{name: name for name in [*VIEWS, "pt_coll", "pt_chars"]})
    try:
        with quiet_pyspark_error_logs():
            return [f.dataType for f in spark.sql(text).schema.fields]
    except AnalysisException:
        return None


ACCEPTED = [
    "SELECT i, b, s, d, m, dt, f, fl, sh FROM {pt_p} AS p",
    "SELECT mp, arr, st FROM {pt_p} AS p WHERE p.i = 1",
    "SELECT p.i AS x, q.K AS y FROM {pt_p} AS p JOIN {pt_q} AS q ON p.i = q.K",
    "SELECT p.s, K FROM {pt_p} AS p, {pt_q} AS q WHERE p.s = q.Name AND flag",
    "SELECT a.i, b.s FROM {pt_p} AS a JOIN {pt_p} AS b ON a.i = b.sh WHERE a.d < b.m",
    "SELECT i FROM {pt_p} AS p WHERE m BETWEEN 1 AND 2.5 AND i IN (1, 2, NULL, -3)",
    "SELECT dt FROM {pt_p} AS p WHERE dt IS NULL OR NOT (f = TRUE) OR s <> 'x'",
    "SELECT st FROM {pt_p} AS p WHERE mp IS NOT NULL AND NULL = i AND fl >= 1.5",
    "SELECT p.dt FROM {pt_p} AS p JOIN {pt_q} AS q ON p.dt = q.dt WHERE b > 10000000000",
    "SELECT p.b FROM {pt_p} AS p CROSS JOIN {pt_q} AS q WHERE p.i = q.i AND TRUE",
    "SELECT i + 1, b - i, (i + i) - 1, p.b + b AS x FROM {pt_p} AS p",  # INT/BIGINT sums
    "SELECT p.i + q.K FROM {pt_p} AS p JOIN {pt_q} AS q ON p.i = q.i",
    "SELECT 1, 0",  # an anchor of integer literals, no relation
    "SELECT 1 AS a, -5 AS b, 2147483646 AS c, 0",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_accepted_shapes_type_as_spark(spark, case_sensitive, sql):
    types = fast(spark, sql)
    assert types is not None
    assert types == analysed(spark, sql)


@pytest.mark.parametrize("sql,accepted_when", [
    ("SELECT P.I, Q.k FROM {pt_p} AS p JOIN {pt_q} AS q ON P.i = q.K", "insensitive"),
    ("SELECT a FROM {pt_dup} AS d", "sensitive"),  # `a` and `A` differ only by case
    ("SELECT d.A FROM {pt_dup} AS d", "sensitive"),
    ("SELECT name FROM {pt_q} AS q", "insensitive"),
])
def test_case_follows_the_conf(spark, case_sensitive, sql, accepted_when):
    types = fast(spark, sql)
    if (accepted_when == "sensitive") == case_sensitive:
        assert types is not None and types == analysed(spark, sql)
    else:
        assert types is None
        assert analysed(spark, sql) is None  # Spark refuses it too: its error stands


def test_exact_names_need_no_conf(spark):
    select = parse_one("SELECT p.i, q.K FROM {pt_p} AS p JOIN {pt_q} AS q ON p.i = q.K", read="rasql")

    def unread():
        raise AssertionError("the conf decides nothing here")

    assert plain_types(select, lambda t: spark.table(t.this.name).schema, unread) is not None


DECLINED_REFUSED = [  # Spark refuses these: the fast path must leave them to it
    "SELECT i FROM {pt_p} AS p, {pt_q} AS q",  # ambiguous
    "SELECT nope FROM {pt_p} AS p",  # unresolved
    "SELECT p.i FROM {pt_p} AS p WHERE q.i = 1",  # unknown qualifier
    "SELECT p.i FROM {pt_p} AS p WHERE mp = 1",  # comparing a map
    "SELECT p.i FROM {pt_p} AS p WHERE mp = mp",  # maps are not comparable
    "SELECT p.i FROM {pt_p} AS p WHERE i",  # not a boolean
    "SELECT p.i FROM {pt_p} AS p WHERE NULL",
    "SELECT c FROM {pt_coll} AS x WHERE c = s",  # collations clash
    "SELECT p.i FROM {pt_p} AS p JOIN {pt_q} AS q ON q.i = r.i JOIN {pt_q} AS r ON TRUE",  # ON scope
    "SELECT p.i FROM {pt_p} AS p WHERE st = st.x",
]

DECLINED_OTHER = [  # Spark may accept these, but they are not plain
    "SELECT abs(i) FROM {pt_p} AS p",  # a function
    "SELECT d + 1 FROM {pt_p} AS p",  # arithmetic on a DOUBLE
    "SELECT i + sh FROM {pt_p} AS p",  # a SMALLINT
    "SELECT i + 1.5 FROM {pt_p} AS p",
    "SELECT i + 2147483648 FROM {pt_p} AS p",
    "SELECT i * 2 FROM {pt_p} AS p",
    "SELECT 1 + 1 FROM {pt_p} AS p",  # no column
    "SELECT i FROM {pt_p} AS p WHERE i + 1 = 2",  # arithmetic in a condition
    "SELECT CAST(i AS bigint) FROM {pt_p} AS p",
    "SELECT i FROM {pt_p} AS p WHERE s = 1",  # string against number
    "SELECT i FROM {pt_p} AS p WHERE dt = '2020-01-01'",
    "SELECT i FROM {pt_p} AS p WHERE f = 1",
    "SELECT i FROM {pt_p} AS p WHERE arr = arr",  # arrays: not one of the families
    "SELECT st.x FROM {pt_p} AS p",  # a nested field
    "SELECT DISTINCT i FROM {pt_p} AS p",
    "SELECT i FROM {pt_p} AS p LEFT JOIN {pt_q} AS q ON p.i = q.K",
    "SELECT p.i FROM {pt_p} AS p JOIN {pt_q} AS q USING (i)",
    "SELECT * FROM {pt_p} AS p",
    "SELECT i FROM {pt_p} AS p ORDER BY i",
    "SELECT i FROM {pt_p} AS p LIMIT 1",
    "SELECT 1 FROM {pt_p} AS p",
    "SELECT i FROM {pt_p} AS p WHERE i IN (SELECT K FROM {pt_q} AS q)",
    "SELECT x FROM {pt_p} AS p(x)",
    "SELECT i FROM pt_p AS p",  # not a bound relation
    "SELECT i FROM {pt_p} AS p WHERE i = :v",  # a parameter
    "SELECT i FROM {pt_p} AS p WHERE i = 1e3",
    "SELECT i FROM {pt_p} AS p WHERE f IS TRUE",
    "SELECT 2147483648",  # BIGINT
    "SELECT -2147483648",  # INT, as Spark reads it, but at the edge of the range
    "SELECT 1L",
    "SELECT 1.5",
    "SELECT 1e3",
    "SELECT 'a'",
    "SELECT 1, NULL",
    "SELECT TRUE",
    "SELECT 1 WHERE TRUE",
    "SELECT 1 + 1",
]


@pytest.mark.parametrize("sql", DECLINED_REFUSED)
def test_declines_what_spark_refuses(spark, case_sensitive, sql):
    assert fast(spark, sql) is None
    assert analysed(spark, sql) is None


@pytest.mark.parametrize("sql", DECLINED_OTHER)
def test_declines_what_is_not_plain(spark, sql):
    assert fast(spark, sql) is None


def test_non_ascii_names_decline(spark):
    assert fast(spark, "SELECT v.id FROM {pt_dotless} AS v") is None
    assert fast(spark, "SELECT v.\u0131d FROM {pt_dotless} AS v") is None
    assert fast(spark, "SELECT p.i FROM {pt_p} AS p") is not None


def test_char_and_varchar_columns_decline(spark):
    """Spark reads them padded or length-checked: left to its analysis."""
    for sql in ["SELECT label FROM {pt_chars} AS c", "SELECT Src FROM {pt_chars} AS c WHERE code = 'x'"]:
        assert fast(spark, sql) is None
        assert analysed(spark, sql) is not None
    sql = "SELECT Src, Dst FROM {pt_chars} AS c WHERE Src < 3"  # its other columns are plain
    assert fast(spark, sql) == analysed(spark, sql)


def test_unknown_relation_declines(spark):
    select = parse_one("SELECT i FROM {pt_p} AS p", read="rasql")
    assert plain_types(select, lambda t: None, lambda: False) is None


# Random branches over the views: wherever the fast path answers, Spark agrees; wherever
# Spark refuses, the fast path declined.
COLUMNS = {"pt_p": ["i", "b", "s", "d", "m", "dt", "f", "fl", "sh", "mp", "arr"],
           "pt_q": ["i", "K", "s", "flag", "dt", "Name"], "pt_dup": ["a", "A"]}
LITERALS = ["1", "-2", "2.5", "10000000000", "'x'", "TRUE", "FALSE", "NULL", "abs(1)", "1 + 1"]


def _branch(rng: random.Random) -> str:
    chosen = [(rng.choice(list(COLUMNS)), rng.choice(["a", "b", "c", "A"])) for _ in range(rng.randint(1, 3))]

    def column() -> str:
        view, alias = rng.choice(chosen)
        name = rng.choice(COLUMNS[view] + ["nope"])
        name = rng.choice([name, name.upper(), name.lower()])
        return f"{rng.choice([alias, alias.lower(), ''])}.{name}".lstrip(".")

    def operand() -> str:
        return column() if rng.random() < 0.6 else rng.choice(LITERALS)

    def condition(depth: int) -> str:
        kind = rng.choice(["cmp", "cmp", "in", "between", "is", "not", "andor", "col"] if depth else
                          ["cmp", "in", "between", "is", "col"])
        if kind == "cmp":
            return f"{operand()} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {operand()}"
        if kind == "in":
            return f"{operand()} IN ({', '.join(operand() for _ in range(rng.randint(1, 3)))})"
        if kind == "between":
            return f"{operand()} BETWEEN {operand()} AND {operand()}"
        if kind == "is":
            return f"{operand()} IS {rng.choice(['', 'NOT '])}NULL"
        if kind == "not":
            return f"NOT ({condition(depth - 1)})"
        if kind == "col":
            return column()
        return f"({condition(depth - 1)}) {rng.choice(['AND', 'OR'])} ({condition(depth - 1)})"

    items = ", ".join(column() + rng.choice(["", " AS out"]) for _ in range(rng.randint(1, 3)))
    view, alias = chosen[0]
    text = f"SELECT {items} FROM {{{view}}} AS {alias}"
    for view, alias in chosen[1:]:
        text += rng.choice([f" JOIN {{{view}}} AS {alias} ON {condition(1)}", f", {{{view}}} AS {alias}"])
    if rng.random() < 0.8:
        text += f" WHERE {condition(2)}"
    return text


def test_random_branches_agree_with_spark(spark, case_sensitive):
    rng = random.Random(28 + case_sensitive)
    accepted = refused = 0
    for _ in range(250):
        sql = _branch(rng)
        types, spark_types = fast(spark, sql), analysed(spark, sql)
        if types is not None:
            accepted += 1
            assert types == spark_types, sql
        refused += spark_types is None
    assert accepted >= 20 and refused >= 20, (accepted, refused)  # both sides exercised


# End to end: a recursive statement over `edge`; the errors below are what main (c07a958, before
# the fast path) reports for each bad branch, under both `spark.sql.caseSensitive` settings, but
# that a type mismatch or an ambiguous name now points at what Spark names (main had no position).
EDGE = "Src int, Dst int, Name string, M map<string,int>, X int"
HEAD = ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM edge) UNION "
        "(SELECT tc.X, edge.Dst FROM tc, edge WHERE {cond}) SELECT X, Y FROM tc")
VIEW_OF = "CREATE OR REPLACE TEMPORARY VIEW pt_bad AS "


def _bad(sql: str, condition: str, needle: str, message: str) -> tuple:
    """(statement, condition, line, pos, message start), the position that of `needle` (after
    its first `|`, if it has one), counted by hand here rather than taken from recsql."""
    before, _, at = needle.rpartition("|")
    return sql, condition, 1, sql.index(before + at) + len(before), message


BAD = [
    (HEAD.format(cond="tc.Y = edge.Nope"), "RECSQL_UNKNOWN_COLUMN", 1, 117,
     "Column `Nope` of `edge` cannot be resolved."),
    (VIEW_OF + HEAD.format(cond="tc.Y = edge.Nope"),
     "RECSQL_UNKNOWN_COLUMN", 1, 160, "Column `Nope` of `edge` cannot be resolved."),
    (HEAD.format(cond="tc.Y = edge.Src").replace("edge.Dst FROM tc", "edge.Dest FROM tc"),
     "UNRESOLVED_COLUMN.WITH_SUGGESTION", 1, 81,
     "A column, variable, or function parameter with name `edge`.`Dest` cannot be resolved."),
    _bad(HEAD.format(cond="tc.Y = edge.M"), "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES", "tc.Y = edge.M",
         'Cannot resolve "(Y = M)" due to data type mismatch'),
    _bad(VIEW_OF + HEAD.format(cond="tc.Y = edge.M"), "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
         "tc.Y = edge.M", 'Cannot resolve "(Y = M)" due to data type mismatch'),
    _bad(HEAD.format(cond="X = edge.Src"), "AMBIGUOUS_REFERENCE", "WHERE |X = edge.Src",
         "Reference `X` is ambiguous, could be: [`edge`.`X`, `tc`.`X`]."),
    _bad(HEAD.format(cond="edge.Src"), "DATATYPE_MISMATCH.FILTER_NOT_BOOLEAN", "WHERE |edge.Src",
         'Cannot resolve "Src" due to data type mismatch: Filter expression "Src" of type "INT" is '
         "not a boolean."),
    (HEAD.replace("FROM edge)", "FROM edge WHERE Nope = 1)").format(cond="tc.Y = edge.Src"),
     "UNRESOLVED_COLUMN.WITH_SUGGESTION", 1, 61,
     "A column, variable, or function parameter with name `Nope` cannot be resolved."),
    _bad(HEAD.replace("FROM edge)", "FROM edge WHERE M = 1)").format(cond="tc.Y = edge.Src"),
         "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES", "M = 1",
         'Cannot resolve "(M = 1)" due to data type mismatch'),
]


@pytest.fixture
def edge(view):
    view("edge", [(1, 2, "a", {"k": 1}, 1), (2, 3, "b", {"k": 2}, 2)], EDGE)


@pytest.mark.parametrize("sql,condition,line,pos,message", BAD)
def test_bad_branch_errors_as_before(spark, edge, case_sensitive, sql, condition, line, pos, message):
    with pytest.raises(RecSQLError) as info:
        recsql.run(sql, spark=spark)
    err = info.value
    assert (err.condition, err.line, err.pos) == (condition, line, pos), str(err)
    assert err.message.startswith(message), err.message


def test_case_of_a_column_name_follows_the_conf(spark, edge, case_sensitive):
    sql = HEAD.format(cond="tc.y = edge.src")
    if case_sensitive:
        with pytest.raises(RecSQLError) as info:
            recsql.run(sql, spark=spark)
        assert (info.value.condition, info.value.line, info.value.pos) == \
            ("UNRESOLVED_COLUMN.WITH_SUGGESTION", 1, 108)
    else:
        got = sorted(tuple(r) for r in recsql.run(sql, spark=spark).df.collect())
        assert got == [(1, 2), (1, 3), (2, 3)]  # the closure of 1 -> 2 -> 3, by hand


def test_catalog_table_branches_are_typed_without_spark(spark, monkeypatch):
    """A catalog table read by plain branches; the VARCHAR column goes through Spark."""
    typed_by_spark = []
    analysed_branch = analysis._typed_branch

    def recorded(run, cte, branch, refs):
        typed_by_spark.append(branch.select.sql("rasql"))
        return analysed_branch(run, cte, branch, refs)

    monkeypatch.setattr(analysis, "_typed_branch", recorded)
    sql = ("WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM pt_chars) UNION "
           "(SELECT tc.X, c.Dst FROM tc JOIN pt_chars c ON tc.Y = c.Src) SELECT X, Y FROM tc")
    got = sorted(tuple(r) for r in recsql.run(sql, spark=spark).df.collect())
    assert got == [(1, 2), (1, 3), (2, 3)]  # the closure of 1 -> 2 -> 3, by hand
    assert typed_by_spark == []
    labelled = ("WITH recursive tc (X, L) AS (SELECT Src, label FROM pt_chars) UNION "
                "(SELECT c.Dst, tc.L FROM tc JOIN pt_chars c ON tc.X = c.Src) SELECT X, L FROM tc")
    result = recsql.run(labelled, spark=spark).df
    assert sorted(tuple(r) for r in result.collect()) == [(1, "a"), (2, "a"), (2, "b"), (3, "a"), (3, "b")]
    assert result.schema["L"].dataType.simpleString() == "string"
    assert len(typed_by_spark) == 1  # the base branch reads `label`; the recursive one only `tc.L`


def test_closure_view_is_typed_without_spark(spark, edge, monkeypatch):
    """The demand benchmark's shape: a closure view asked for one node's ancestors. Every
    branch is plain, so typing asks Spark nothing; the answer is checked by hand."""
    def analysed_branch(*args):
        raise AssertionError("a plain branch was typed by Spark")

    monkeypatch.setattr(analysis, "_typed_branch", analysed_branch)
    recsql.run("CREATE OR REPLACE TEMPORARY VIEW pt_closure AS WITH recursive tc (X, Y) AS "
               "(SELECT Src, Dst FROM edge) UNION (SELECT tc.X, edge.Dst FROM tc, edge "
               "WHERE tc.Y = edge.Src) SELECT X AS node, Y AS reached FROM tc", spark=spark)
    try:
        result = recsql.run("SELECT node FROM pt_closure WHERE reached = 3", spark=spark)
        assert sorted(r.node for r in result.df.collect()) == [1, 2]
        assert result.df.schema["node"].dataType.simpleString() == "int"
    finally:
        spark.catalog.dropTempView("pt_closure")


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_integral_sums_type_as_spark_with_ansi_on_or_off(spark, ansi):
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        for sql in ["SELECT i + i, i - b, b + 1, 1 + i, i - (b - 7) FROM {pt_p} AS p",
                    "SELECT p.i + q.K, q.K - p.i FROM {pt_p} AS p JOIN {pt_q} AS q ON p.i = q.i"]:
            types = fast(spark, sql)
            assert types is not None and types == analysed(spark, sql), sql
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)


def test_every_sum_of_a_column_agrees_with_spark(spark):
    """Each column of `pt_p` plus or minus each of its columns and each literal: wherever the
    fast path answers, Spark agrees; wherever Spark refuses, the fast path declined."""
    accepted = 0
    for left in COLUMNS["pt_p"]:
        for op in ("+", "-"):
            for right in [*COLUMNS["pt_p"], *LITERALS]:
                sql = f"SELECT {left} {op} {right} FROM {{pt_p}} AS p"
                types, spark_types = fast(spark, sql), analysed(spark, sql)
                if types is not None:
                    accepted += 1
                    assert types == spark_types, sql
    assert accepted >= 8, accepted  # i/b with i, b, 1 and 1 + 1, both ways
