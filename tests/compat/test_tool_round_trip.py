"""Every query in README.md, docs/ and examples/ survives what BI tools do to it.

Superset parses each statement with sqlglot (the Hive dialect for a `hive://` database) and
sends the regenerated, pretty-printed text (`superset/sql/parse.py`: `sqlglot.parse(script,
dialect=...)`, then `SQLStatement.format()`, the dialect's generator with `pretty=True`). So each
query that tools parse is put through the Hive and the Spark round trip and must give the same
rows after it as before. A query in RaSQL's compact form (a head aggregate, the parenthesised
body) does not parse there: its own file must hold a tool-spelled twin with the same plan,
which then goes through the round trips.

Queries are the ```sql blocks and the triple-quoted queries of ```python blocks of the Markdown
files, the query statements of examples/*.sql (their other statements create the views they
read), and the queries of examples/python_api.py. The shell lines and transcripts of docs/cli.md
are CLI demonstrations, not collected. `{name}` placeholders are the Python API's (pyspark's
templating), which a tool never sends and Hive reads as a struct: those queries take the Spark
round trip only."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlglot
from conftest import REPO, rows
from sqlglot import exp

import recsql
from recsql.parser import parse_statement, split_statements
from recsql.parser.dialect import CycleClause, SearchClause
from recsql.planner import plan_query, render_plan
from recsql.statements.catalog import SparkCatalog

EXAMPLES = REPO / "examples"
TOOL_DIALECTS = ("hive", "spark")


@dataclass
class Query:
    source: str  # the file, relative to the repository
    text: str
    setup: list[str] = field(default_factory=list)  # statements creating what it reads
    kwargs: dict = field(default_factory=dict)  # the Python API's keyword arguments, if any
    args: dict | None = None

    @property
    def dialects(self) -> tuple[str, ...]:
        return ("spark",) if re.search(r"\{\w+\}", self.text) else TOOL_DIALECTS

    @property
    def tool_spelled(self) -> bool:
        try:
            for dialect in self.dialects:
                sqlglot.parse_one(self.text, read=dialect)
        except sqlglot.errors.ParseError:
            return False
        return True


def _is_query(text: str) -> bool:
    return isinstance(parse_statement(text).expression, exp.Query)


def _markdown_queries(path: Path) -> list[Query]:
    text = path.read_text()
    found = []
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        block = "\n".join(line for line in block.splitlines() if not line.startswith("{{"))  # dbt's Jinja
        found += [s.strip() for s in split_statements(block)]
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        found += [s.strip() for s in re.findall(r'"""(.*?)"""', block, re.S) if "SELECT" in s]
    source = str(path.relative_to(REPO))
    return [Query(source, q, kwargs=_docs_placeholders(q)) for q in found if _is_query(q)]


def _docs_placeholders(text: str) -> dict:
    """What the docs' Python snippets pass for their placeholders (docs/cli.md: `edges=edges,
    source=1`, `edges` read from examples/data/roads.csv, the docs' `edge`)."""
    known = {"source": 1, "frames": {"edges": "edge"}}
    names = set(re.findall(r"\{(\w+)\}", text))
    assert names <= {"source", "edges"}, f"a docs query with placeholders {names}: say what they are bound to"
    return {k: v for k, v in known.items() if names} if names else {}


def _example_queries(path: Path) -> list[Query]:
    setup, found = [], []
    for statement in split_statements(path.read_text()):
        if _is_query(statement):
            found.append(Query(str(path.relative_to(REPO)), statement.strip(), list(setup)))
        else:  # a view over the example's own data, read from anywhere
            setup.append(statement.replace("'data/", f"'{EXAMPLES}/data/"))
    return found


def _python_api_queries() -> list[Query]:
    path = EXAMPLES / "python_api.py"
    module = ast.parse(path.read_text())
    texts = {t.id: n.value.value for n in module.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
             and "SELECT" in n.value.value}
    csv = "CREATE OR REPLACE TEMP VIEW {0} USING csv OPTIONS (path '{1}/data/{2}', header 'true', inferSchema 'true')"
    calls = {  # as examples/python_api.py calls them
        "SHORTEST_PATHS": ([csv.format("roads", EXAMPLES, "roads.csv")], {"source": 1}, None, {"edges": "roads"}),
        "ORGANISATION_SIZE": ([csv.format("report_csv", EXAMPLES, "report.csv")], {}, {"least": 1},
                              {"report": "report_csv"}),
    }
    assert set(texts) == set(calls), "a new query in examples/python_api.py: say how it is called"
    source = str(path.relative_to(REPO))
    return [Query(source, texts[name].strip(), setup, {**kwargs, "frames": frames}, args)
            for name, (setup, kwargs, args, frames) in calls.items()]


def _all_queries() -> list[Query]:
    found = _markdown_queries(REPO / "README.md")
    for path in sorted((REPO / "docs").glob("*.md")):
        found += _markdown_queries(path)
    for path in sorted(EXAMPLES.glob("*.sql")):
        found += _example_queries(path)
    return found + _python_api_queries()


QUERIES = _all_queries()
TOOL_SPELLED = [q for q in QUERIES if q.tool_spelled]


def _search_or_cycle(query: Query) -> bool:
    """SQL:1999's SEARCH/CYCLE clauses: sqlglot's Hive and Spark dialects parse neither and no
    other spelling exists, so such a query has no tool-spelled twin (docs/dialect.md says so)."""
    return any(isinstance(n, (SearchClause, CycleClause)) for n in parse_statement(query.text).expression.walk())


RASQL_ONLY = [q for q in QUERIES if not q.tool_spelled and not _search_or_cycle(q)]


def _id(query: Query) -> str:
    code = [line for line in query.text.splitlines() if not line.lstrip().startswith("--")]
    first = " ".join(" ".join(code).split())[:40]
    return f"{query.source}:{first}"


def round_trip(text: str, dialect: str) -> str:
    """What Superset sends: the statement parsed and regenerated, pretty, in one dialect."""
    return sqlglot.parse_one(text, read=dialect).sql(dialect=dialect, pretty=True)


def _docs_edge(spark) -> None:
    """The `edge` the docs' queries read: examples/roads.csv (examples/sssp.sql reads it too)."""
    spark.read.csv(str(EXAMPLES / "data" / "roads.csv"), header=True, inferSchema=True) \
        .createOrReplaceTempView("edge")


@pytest.fixture
def docs_edge(spark):
    _docs_edge(spark)
    yield
    spark.catalog.dropTempView("edge")


def _run(spark, query: Query, text: str) -> list[tuple]:
    kwargs = dict(query.kwargs)
    frames = {k: spark.table(v) for k, v in kwargs.pop("frames", {}).items()}
    return rows(recsql.sql(text, query.args, spark=spark, **kwargs, **frames))


def _set_up(spark, query: Query) -> list[str]:
    """The views `query` reads: its example's own, else the docs' `edge`."""
    if not query.setup:
        _docs_edge(spark)
        return ["edge"]
    for statement in query.setup:
        recsql.sql(statement, spark=spark)
    return re.findall(r"TEMP VIEW (\w+)", " ".join(query.setup), re.I)


def test_every_kind_of_source_is_collected():
    sources = {q.source for q in QUERIES}
    assert {"README.md", "docs/dialect.md", "docs/server.md", "examples/sssp.sql",
            "examples/python_api.py"} <= sources
    assert len({q.source for q in QUERIES if q.source.startswith("examples/")}) == 13
    assert RASQL_ONLY, "the compact RaSQL form is documented too"


@pytest.mark.parametrize("query", TOOL_SPELLED, ids=[_id(q) for q in TOOL_SPELLED])
def test_same_rows_after_the_tool_round_trips(spark, query):
    views = _set_up(spark, query)
    try:
        before = _run(spark, query, query.text)
        assert before, "a documented query with no rows proves nothing"
        for dialect in query.dialects:
            assert _run(spark, query, round_trip(query.text, dialect)) == before, dialect
    finally:
        for view in views:
            spark.catalog.dropTempView(view)


@pytest.mark.parametrize("query", RASQL_ONLY, ids=[_id(q) for q in RASQL_ONLY])
def test_a_rasql_only_query_has_a_tool_spelled_twin(spark, docs_edge, query):
    views = _set_up(spark, query) if query.setup else []  # an example's own views and aggregates
    catalog = SparkCatalog(spark)

    def plan(text: str) -> str:
        return render_plan(plan_query(parse_statement(text).expression, text, catalog))

    mine = plan(query.text)
    twins = [q for q in TOOL_SPELLED if q.source == query.source and plan(q.text) == mine]
    for view in views:
        spark.catalog.dropTempView(view)
    assert twins, f"{query.source}: no tool-spelled query with the plan of\n{query.text}"
