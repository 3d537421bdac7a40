"""recsql's SEARCH and CYCLE clauses against a real PostgreSQL, on PostgreSQL's own statements.

`tests/data/postgres-with/search_cycle.sql` holds every SEARCH/CYCLE statement of PostgreSQL's
`src/test/regress/sql/with.sql` with the tables they read. Each case runs on PostgreSQL (the
oracle) and through `recsql.sql`: where PostgreSQL answers, recsql gives the same columns and the
same rows (as a multiset, values in PostgreSQL's text form; in the same order of the ORDER BY
columns where the statement orders); where PostgreSQL refuses, recsql raises a RecSQLError that
carries PostgreSQL's message. The skipped statements say why in the file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
from conftest import DATA
from postgres import pg_text, postgres  # noqa: F401 (the session fixture)

import recsql
from recsql import RecSQLError
from recsql.parser import parse_statement, split_statements

SQL_FILE = DATA / "postgres-with" / "search_cycle.sql"
RECORD, RECORD_ARRAY = 2249, 2287  # PostgreSQL's type oids
SPARK_TYPES = {"integer": "INT", "bigint": "BIGINT", "text": "STRING", "boolean": "BOOLEAN"}


@dataclass
class Block:
    kind: str  # "setup", "case" or "skip"
    name: str
    reason: str = ""
    statements: list[str] = field(default_factory=list)


def read_blocks() -> list[Block]:
    blocks: list[Block] = []
    text: list[str] = []

    def close() -> None:
        if blocks:
            blocks[-1].statements = [s.strip() for s in split_statements("\n".join(text))]
        text.clear()

    for line in SQL_FILE.read_text().splitlines():
        header = re.match(r"-- (setup|case|skip)\b ?([\w]*):? ?(.*)", line)
        if header:
            close()
            kind, name, reason = header.groups()
            blocks.append(Block(kind, name or f"setup{len(blocks)}", reason))
        elif blocks:
            text.append(line)
    close()
    return blocks


BLOCKS = read_blocks()
CASES = [b for b in BLOCKS if b.kind == "case"]


@pytest.fixture(scope="module")
def pg(postgres, spark):  # noqa: F811
    """A PostgreSQL connection with the file's tables, copied into Spark as temp views."""
    con = postgres.connect()
    # records and arrays of records as PostgreSQL prints them (pg8000 would parse them)
    for oid in (RECORD, RECORD_ARRAY):
        con.register_in_adapter(oid, str)
    setup = [s for b in BLOCKS if b.kind == "setup" for s in b.statements]
    for statement in setup:
        con.run(statement)
    for statement in setup:
        created = re.match(r"create temp table (\w+)", statement)
        if created:
            _copy_table(con, spark, created.group(1))
    yield con
    con.close()


def _copy_table(con, spark, name: str) -> None:
    columns = con.run("select column_name, data_type from information_schema.columns "
                      "where table_name = :name order by ordinal_position", name=name)
    schema = ", ".join(f"{c} {SPARK_TYPES[t]}" for c, t in columns)
    data = con.run(f"select * from {name}")
    spark.createDataFrame([tuple(r) for r in data], schema).createOrReplaceTempView(name)


def _pg_answer(con, statement: str):
    import pg8000.native

    try:
        data = con.run(statement)
    except pg8000.native.DatabaseError as error:
        return None, error.args[0]["M"]
    names = [c["name"] for c in con.columns]
    return (names, [tuple(pg_text(v) for v in row) for row in data]), None


def _order_columns(statement: str) -> list[str]:
    order = parse_statement(statement).expression.args.get("order")
    return [o.this.name.lower() for o in order.expressions] if order else []


def test_the_file_holds_every_search_cycle_statement():
    """The cases and skips cover the statements of the file (a parse slip would drop some)."""
    queries = [s for b in BLOCKS if b.kind != "setup" for s in b.statements]
    assert sum(bool(re.search(r"\b(search|cycle)\b", s)) for s in queries) == 38
    assert len(CASES) == 31


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_postgres_statement(case, pg, spark):
    *setup, statement = case.statements
    for text in setup:
        pg.run(text)
        recsql.sql(text, spark=spark)
    expected, pg_error = _pg_answer(pg, statement)
    if pg_error is not None:
        with pytest.raises(RecSQLError) as raised:
            recsql.sql(statement, spark=spark).collect()
        assert pg_error in str(raised.value), (pg_error, str(raised.value))
        assert raised.value.line is not None, "the error gives its line"
        return
    df = recsql.sql(statement, spark=spark)
    names, pg_rows = expected
    assert [c.lower() for c in df.columns] == names
    got = df.collect()
    rows = [tuple(pg_text(v) for v in row) for row in got]
    assert Counter(rows) == Counter(pg_rows)
    order = _order_columns(statement)
    if order:
        positions = [names.index(c) for c in order]
        assert [[r[p] for p in positions] for r in rows] == [[r[p] for p in positions] for r in pg_rows]


CARRIED = """with recursive reach(root, t, label) as (
	select f, t, label from {graph} g
	union all
	select sg.root, g.t, g.label
	from {graph} g, reach sg
	where g.f = sg.t
) {clause}
select * from reach where {where}"""


@pytest.mark.parametrize("clause", ["search depth first by t set seq", "search breadth first by t set seq",
                                    "cycle t set is_cycle using path",
                                    "search depth first by t set seq cycle t set is_cycle using path"])
@pytest.mark.parametrize("where, pushed", [("root = 1", True), ("root in (4, null)", True),
                                           ("t = 3", False)])
def test_a_filter_on_a_carried_column_is_pushed_through_search_and_cycle(clause, where, pushed, pg, spark):
    """A filter on a column every recursive step carries unchanged from its anchor row reaches
    the anchors of a SEARCH/CYCLE CTE as of any other (the clause's columns follow each path
    from its anchor); one on another column is not pushed, for a reason in the query's terms,
    not the rewrite's. PostgreSQL gives the rows (a SEARCH alone reads the acyclic `graph0`: over
    `graph`'s cycle it would never end)."""
    graph = "graph" if "cycle" in clause else "graph0"
    statement = CARRIED.format(clause=clause, where=where, graph=graph)
    expected, pg_error = _pg_answer(pg, statement)
    assert pg_error is None and expected is not None
    names, pg_rows = expected
    result = recsql.run(statement, spark=spark)
    assert [c.lower() for c in result.df.columns] == names
    assert Counter(tuple(pg_text(v) for v in row) for row in result.df.collect()) == Counter(pg_rows)
    [note] = result.plan.demand
    if pushed:
        assert note.startswith("demand: pushed") and "base branches of reach" in note
    else:
        assert note == ("demand: not pushed t = 3 into reach: column t is not carried unchanged by "
                        "recursive branch 2 (it outputs g.t)")
