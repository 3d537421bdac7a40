"""Parser: the `rasql` sqlglot dialect round-trips its fixtures and reads RaSQL forms."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

import recsql.parser  # noqa: F401  (registers the dialect)
from recsql.errors import RecSQLParseError
from recsql.parser import AggregateColumn, parse_statement, split_statements

FIXTURES = Path(__file__).parent / "fixtures"


def _lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_text()
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


IDENTITY = _lines("identity.sql")
FORMS = [tuple(line.split("\t")) for line in _lines("rasql_forms.tsv")]


def test_fixture_files_are_not_empty():
    assert len(IDENTITY) >= 20
    assert len(FORMS) >= 5


@pytest.mark.parametrize("query", IDENTITY, ids=[f"line{i + 1}" for i in range(len(IDENTITY))])
def test_identity_round_trip(query):
    assert sqlglot.parse_one(query, read="rasql").sql("rasql") == query


@pytest.mark.parametrize("rasql,canonical", FORMS, ids=[f"form{i + 1}" for i in range(len(FORMS))])
def test_rasql_form_renders_to_canonical(rasql, canonical):
    parsed = sqlglot.parse_one(rasql, read="rasql")
    assert parsed.sql("rasql") == canonical
    # The RaSQL form and the standard form mean the same tree.
    assert parsed == sqlglot.parse_one(canonical, read="rasql")
    assert canonical in IDENTITY or sqlglot.parse_one(canonical, read="rasql").sql("rasql") == canonical


@pytest.mark.parametrize(
    "head,func,name",
    [
        ("min() AS Cost", "min", "Cost"),
        ("mmin AS Cost", "mmin", "Cost"),
        ("mmin() AS Cost", "mmin", "Cost"),
        ("count() Cnt", "count", "Cnt"),
        ("MAX() AS E", "MAX", "E"),
        ("msum B", "msum", "B"),
        ("mcount() AS N", "mcount", "N"),
        ("avg() AS A", "avg", "A"),  # parses; the planner rejects it
    ],
)
def test_head_aggregate_spellings(head, func, name):
    q = f"WITH RECURSIVE r (K, {head}) AS (SELECT 1, 1) UNION (SELECT r.K, r.{name} FROM r) SELECT * FROM r"
    tree = sqlglot.parse_one(q, read="rasql")
    columns = [c for c in tree.find_all(AggregateColumn)]
    assert len(columns) == 1
    assert columns[0].func == func
    assert columns[0].name == name


def test_from_and_to_are_column_names():
    q = "SELECT From, To FROM warc WHERE From < To"
    tree = sqlglot.parse_one(q, read="rasql")
    assert [c.name for c in tree.selects] == ["From", "To"]
    assert tree.args["from_"].this.name == "warc"


@pytest.mark.parametrize("written, as_spark_reads_it", [
    # a bare row of VALUES is one expression: `2 AS t` is not a row, `t` names the table
    ("SELECT * FROM VALUES 1, 2 AS t(x)", "SELECT * FROM VALUES (1), (2) AS t(x)"),
    ("SELECT * FROM VALUES 'a', 1 + 2 t(x)", "SELECT * FROM VALUES ('a'), (1 + 2) AS t(x)"),
    ("SELECT * FROM VALUES (1, 2), (3, 4) AS t(x, y)", "SELECT * FROM VALUES (1, 2), (3, 4) AS t(x, y)"),
    # X before a string is a binary literal, with or without a space (Spark's `literalType`)
    ("SELECT hex(X 'F0'), x'0a'", "SELECT HEX(X'F0'), X'0a'"),
    ("SELECT x FROM x WHERE x = 'a'", "SELECT x FROM x WHERE x = 'a'"),
])
def test_spark_spellings_of_values_rows_and_binary_literals(written, as_spark_reads_it):
    assert sqlglot.parse_one(written, read="rasql").sql("rasql") == as_spark_reads_it


def test_parse_statement_peels_explain():
    q = "EXPLAIN FORMATTED WITH RECURSIVE r (X) AS (SELECT 1 UNION SELECT X + 1 FROM r WHERE X < 3) SELECT * FROM r"
    stmt = parse_statement(q)
    assert stmt.explain == "FORMATTED"
    assert stmt.expression is not None
    assert stmt.text == q


def test_parse_statement_plain_explain_mode():
    stmt = parse_statement("EXPLAIN SELECT 1")
    assert stmt.explain == "SIMPLE"


def test_split_statements_keeps_text_and_ignores_semicolons_in_strings():
    text = "SELECT 'a;b' AS x;\n  SELECT 2 ;\n\n;-- only a comment\n"
    parts = split_statements(text)
    assert [p.strip() for p in parts] == ["SELECT 'a;b' AS x", "SELECT 2"]


def test_parse_error_has_line_and_pos():
    q = "WITH RECURSIVE r (X) AS (SELECT 1\nUNION SELECT X + FROM r)\nSELECT * FROM r"
    with pytest.raises(RecSQLParseError) as info:
        parse_statement(q)
    err = info.value
    assert err.line is not None and err.line >= 1
    assert err.pos is not None and err.pos >= 0
    assert "== SQL ==" in str(err)
    assert "^" in str(err)


def test_text_that_crashes_sqlglots_parser_is_a_located_syntax_error():
    """`0{=` made sqlglot 30.30's parser raise AttributeError (found by the fuzz campaign). In a
    recursive statement it is recsql's syntax error at the token the parser reached; without a
    WITH, the statement is left for Spark to parse and report."""
    q = "WITH recursive a (x) AS (SELECT 1) UNION (SELECT x + 1 FROM a)\nSELECT 0{= FROM a"
    with pytest.raises(RecSQLParseError) as info:
        parse_statement(q)
    assert info.value.condition == "PARSE_SYNTAX_ERROR"
    assert (info.value.line, info.value.pos) == (2, 11)
    assert parse_statement("0{=").expression is None


def test_aggregate_column_outside_cte_head_is_a_parse_error():
    q = "WITH r AS (SELECT 1 AS a) SELECT * FROM r AS x(min() AS c)"
    with pytest.raises(RecSQLParseError) as info:
        parse_statement(q)
    assert "only allowed" in info.value.message


def test_sparks_max_recursion_level_clause_is_read_per_cte():
    from sqlglot import exp

    q = ("WITH RECURSIVE r(level) MAX RECURSION LEVEL 200 AS (VALUES (0) UNION ALL SELECT level + 1 "
         "FROM r WHERE level < 5), s MAX RECURSION LEVEL 7 AS (SELECT 1 AS a) SELECT * FROM r, s")
    ctes = list(parse_statement(q).expression.find_all(exp.CTE))
    assert [(c.alias, c.meta.get("max_recursion_level")) for c in ctes] == [("r", 200), ("s", 7)]
