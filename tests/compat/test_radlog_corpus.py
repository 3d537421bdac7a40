"""RaDlog's own RaSQL corpus (queries/, testdata/, results/) and BigDatalog's inline answers."""

from __future__ import annotations

import dataclasses
import re
import warnings

import pytest
import sqlglot
from conftest import DATA, rows
from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType
from sqlglot import exp

import recsql
from recsql.parser import AggregateColumn, parse_statement, split_statements

TYPES = {"integer": IntegerType(), "int": IntegerType(), "double": DoubleType()}
CREATE = re.compile(r"^\s*create table (\w+)\s*\(([^)]*)\)\s*;\s*$", re.I | re.M)


@pytest.fixture(scope="module")
def corpus(data_dir):
    return data_dir / "radlog-corpus"


def load_query(path):
    """(query text without runner lines, {table: StructType}) of a corpus file."""
    text = path.read_text()
    schemas = {}
    for name, cols in CREATE.findall(text):
        fields = []
        for col in cols.split(","):
            cname, ctype = col.split()
            fields.append(StructField(cname, TYPES[ctype.lower()]))
        schemas[name] = StructType(fields)
    body = CREATE.sub("", text)
    return body.strip(), schemas


def register_csv(spark, name, schema, path):
    spark.read.schema(schema).csv(str(path)).createOrReplaceTempView(name)


def expected_rows(path):
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        values = []
        for v in line.split(", "):
            try:
                values.append(int(v))
            except ValueError:
                values.append(float(v))
        out.append(tuple(values))
    return sorted(out)


def compare(got, expected):
    assert len(got) == len(expected), (got, expected)
    for g, e in zip(got, expected):
        assert len(g) == len(e)
        for x, y in zip(g, e):
            if isinstance(y, float) or isinstance(x, float):
                assert x == pytest.approx(y, rel=1e-6)
            else:
                assert x == y, (g, e)


# (query file, {table in query: testdata file}, keyword args, expected result file)
CASES = [
    ("radlog_tc_ll.sql", {"arc": "arc.csv"}, {}, "tc_ll_arc.csv"),
    ("radlog_reach.sql", {"rc": "rc1.csv"}, {"startvertex": 1}, "reach_rc1_1.csv"),
    ("radlog_sg.sql", {"rel": "sg1.csv"}, {}, "sg_sg1.csv"),
    ("radlog_sg.sql", {"rel": "sg2.csv"}, {}, "sg_sg2.csv"),
    ("radlog_sssp.sql", {"warc": "s1.csv"}, {"startvertex": 1}, "sssp_s1_1.csv"),
    ("radlog_apsp.sql", {"warc": "s1.csv"}, {}, "apsp_s1.csv"),
    ("radlog_cc_all.sql", {"arc": "cc.csv"}, {}, "cc_all_cc.csv"),
    ("radlog_cc_d.sql", {"arc": "cc.csv"}, {}, "cc_d_cc.csv"),
    ("radlog_cc.sql", {"arc": "cc.csv"}, {}, "cc_cc.csv"),
    ("radlog_count_paths.sql", {"rc": "rc1.csv"}, {"startvertex": 1}, "count_paths_rc1_1.csv"),
    ("radlog_count_paths.sql", {"rc": "rc2.csv"}, {"startvertex": 1}, "count_paths_rc2_1.csv"),
    ("radlog_count_paths_all.sql", {"rc": "rc2.csv"}, {}, "count_paths_all_rc2.csv"),
    ("radlog_delivery.sql", {"assbl": "assbl.csv", "basic": "basic.csv"}, {}, "delivery_assbl_basic.csv"),
    ("radlog_management.sql", {"report": "mgr.csv"}, {}, "management_mgr.csv"),
    ("radlog_mlm.sql", {"sales": "sales.csv", "sponsor": "sponsor.csv"}, {}, "mlm_sales_sponsor.csv"),
    ("radlog_coalesce.sql", {"inter": "coalesce.csv"}, {}, "coalesce_coalesce.csv"),
    ("radlog_test1.sql", {"s1": "s1.csv"}, {}, "test1_s1.csv"),
    ("radlog_test2.sql", {"s1": "s1.csv"}, {}, "test2_s1.csv"),
]


def _id(case):
    values = case.values if hasattr(case, "values") else case
    return f"{values[0].removesuffix('.sql')}-{values[3].removesuffix('.csv')}"


# ------------------------------------------------------------- the spelling tools parse, too

# RaSQL's head aggregates and the aggregate a recursive term spells them with (docs/dialect.md
# section 1): count() adds what its branches project, so it is spelled SUM as well
TERM_AGGREGATE = {"min": exp.Min, "mmin": exp.Min, "max": exp.Max, "mmax": exp.Max,
                  "sum": exp.Sum, "msum": exp.Sum, "count": exp.Sum, "mcount": exp.Sum}


def group_by_spelling(script: str) -> str:
    """`script` with every RaSQL head aggregate written as BI tools parse it: a plain head
    column, the recursive terms aggregating that column with GROUP BY the others. Written out by
    sqlglot's Spark generator, every name quoted (RaDlog uses `From` and `To` as column names)."""
    statements = []
    for text in split_statements(script):
        tree = sqlglot.parse_one(text, read="rasql")
        for cte in tree.find_all(exp.CTE):
            _group_by_spelled(cte)
        statements.append(tree.sql("spark", identify=True, comments=False))
    return ";\n".join(statements)


def _group_by_spelled(cte: exp.CTE) -> None:
    alias = cte.args["alias"]
    heads = {k: c.func.lower() for k, c in enumerate(alias.columns) if isinstance(c, AggregateColumn)}
    if not heads:
        return
    alias.set("columns", [exp.to_identifier(c.name) if isinstance(c, AggregateColumn) else c
                          for c in alias.columns])
    for term in _terms(cte.this):
        if not any(t.name.lower() == cte.alias.lower() for t in term.find_all(exp.Table)):
            continue  # an anchor stays as written
        outputs = term.expressions
        for k, func in heads.items():
            value = outputs[k].unalias()
            value.replace(TERM_AGGREGATE[func](this=value.copy()))
        term.group_by(*[outputs[k].unalias().copy() for k in range(len(outputs)) if k not in heads],
                      copy=False)


def _terms(body: exp.Expr) -> list[exp.Select]:
    if isinstance(body, exp.Union):
        return _terms(body.this) + _terms(body.expression)
    if isinstance(body, exp.Subquery):
        return _terms(body.this)
    return [body]


def _has_head_aggregates(script: str) -> bool:
    return any(sqlglot.parse_one(text, read="rasql").find(AggregateColumn)
               for text in split_statements(script))


def _tool_parses(script: str) -> None:
    """Every statement of `script` parses with sqlglot's Spark dialect, and with its Hive one
    (Superset's) unless it holds a `{name}` placeholder, which Hive reads as a struct."""
    for text in split_statements(script):
        sqlglot.parse_one(text, read="spark")
        if "{" not in text:
            sqlglot.parse_one(text, read="hive")


TOOL_CASES = [pytest.param(c, id=_id(c)) for c in CASES
              if _has_head_aggregates(load_query(DATA / "radlog-corpus" / "queries" / c[0])[0])]


def test_every_head_aggregate_query_has_a_tool_spelling():
    heads = {c[0] for c in CASES if _has_head_aggregates(load_query(DATA / "radlog-corpus" / "queries" / c[0])[0])}
    assert heads >= {"radlog_sssp.sql", "radlog_apsp.sql", "radlog_cc.sql", "radlog_count_paths.sql",
                     "radlog_delivery.sql", "radlog_management.sql", "radlog_mlm.sql", "radlog_coalesce.sql"}
    for qfile in heads:
        tools = group_by_spelling(load_query(DATA / "radlog-corpus" / "queries" / qfile)[0])
        assert "GROUP BY" in tools and "() AS" not in tools
        _tool_parses(tools)


@pytest.mark.parametrize("case", [pytest.param(c, id=_id(c)) for c in CASES])
def test_radlog_query(spark, corpus, case):
    qfile, tables, kwargs, result = case
    query, schemas = load_query(corpus / "queries" / qfile)
    for table, csv in tables.items():
        register_csv(spark, table, schemas[table], corpus / "testdata" / csv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CREATE VIEW over temp views warns (expected)
            df = recsql.script(query, spark=spark, **kwargs).df
        compare(rows(df), expected_rows(corpus / "results" / result))
    finally:
        for table in tables:
            spark.catalog.dropTempView(table)
        spark.catalog.dropTempView("lstart")


def _plans(spark, script: str, kwargs: dict) -> list[str]:
    """recsql's recursive plan of each query of `script` (the SQL of every branch and of the
    final query, as the executor sends it; no Spark job), as `_as_run`; a statement that is not
    a query (CREATE VIEW) is run, as the script runs it, so that the queries after it read it."""
    from recsql.planner import plan_query, render_plan
    from recsql.statements.catalog import SparkCatalog

    plans = []
    for text in split_statements(script):
        statement = parse_statement(text.format(**kwargs))
        if isinstance(statement.expression, exp.Query):
            plan = plan_query(statement.expression, statement.text, SparkCatalog(spark))
            plans.append(_as_run(render_plan(plan)))
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # CREATE VIEW over temp views warns (expected)
                recsql.sql(text, spark=spark, **kwargs)
    return plans


def _as_run(plan: str) -> str:
    """A plan's text without what changes nothing that runs: the quotes of the spelling's names
    and the comments it drops (sqlglot writes every name quoted, no comment), and the name of a
    count() head, which the spelling writes as SUM: count() is a sum over contributors
    (`planner.aggregates.AGGREGATES`), one meaning under two names."""
    plan = re.sub(r"/\*.*?\*/ ", "", plan.replace("`", ""))
    return re.sub(r"\bcount\(", "sum(", plan)


def test_a_count_head_is_a_sum_head():
    """What `_as_run` leaves out: count() and sum() heads mean one aggregate."""
    from recsql.planner.aggregates import AGGREGATES

    assert dataclasses.replace(AGGREGATES["count"], name="sum") == AGGREGATES["sum"]


@pytest.mark.parametrize("case", TOOL_CASES)
def test_the_tool_spelling_plans_as_rasql(spark, corpus, case):
    """The GROUP BY spelling of a head-aggregate query (`group_by_spelling`) plans exactly as
    RaSQL's own (no Spark job: plans compared as text), so it answers what `test_radlog_query`
    checks RaSQL's answers."""
    qfile, tables, kwargs, _ = case
    query, schemas = load_query(corpus / "queries" / qfile)
    tools = group_by_spelling(query)
    _tool_parses(tools)
    for table, csv in tables.items():
        register_csv(spark, table, schemas[table], corpus / "testdata" / csv)
    try:
        rasql_plans = _plans(spark, query, kwargs)
        assert rasql_plans and _plans(spark, tools, kwargs) == rasql_plans
    finally:
        for table in tables:
            spark.catalog.dropTempView(table)
        spark.catalog.dropTempView("lstart")


REPRO_CASES = [
    # RaSQL-Reproduction's strings on RaDlog's data; $vertex is Scala interpolation -> 1
    ("repro_reach.sql", "Src int, Dst int", "rc1.csv", "reach_rc1_1.csv"),
    ("repro_sssp.sql", "Src int, Dst int, Cost int", "s1.csv", "sssp_s1_1.csv"),
    ("repro_cc.sql", "Src int, Dst int", "cc.csv", "cc_d_cc.csv"),
    ("repro_cpaths_readme.sql", "Src int, Dst int", "rc2.csv", "count_paths_rc2_1.csv"),
]


def _reproduction(corpus, qfile: str) -> str:
    text = (corpus / "queries" / qfile).read_text()
    return "\n".join(line for line in text.splitlines() if not line.startswith("--")).replace("$vertex", "1")


@pytest.mark.parametrize("qfile,schema,csv,result", REPRO_CASES, ids=[c[0] for c in REPRO_CASES])
def test_reproduction_query(spark, corpus, qfile, schema, csv, result):
    spark.read.schema(schema).csv(str(corpus / "testdata" / csv)).createOrReplaceTempView("edge")
    try:
        compare(rows(recsql.sql(_reproduction(corpus, qfile), spark=spark)),
                expected_rows(corpus / "results" / result))
    finally:
        spark.catalog.dropTempView("edge")


@pytest.mark.parametrize("qfile,schema,csv,result", REPRO_CASES, ids=[c[0] for c in REPRO_CASES])
def test_the_tool_spelling_of_a_reproduction_query_plans_as_it(spark, corpus, qfile, schema, csv, result):
    """As `test_the_tool_spelling_plans_as_rasql`, for RaSQL-Reproduction's strings."""
    query = _reproduction(corpus, qfile)
    tools = group_by_spelling(query)
    _tool_parses(tools)
    spark.read.schema(schema).csv(str(corpus / "testdata" / csv)).createOrReplaceTempView("edge")
    try:
        assert _plans(spark, tools, {}) == _plans(spark, query, {})
    finally:
        spark.catalog.dropTempView("edge")


def test_stratified_results_equal_rasql_ones(corpus):
    for f in (corpus / "results").glob("*_stratified_*.csv"):
        plain = corpus / "results" / f.name.replace("_stratified", "")
        assert expected_rows(f) == expected_rows(plain)


# ------------------------------------------------------------------------ BigDatalog inline answers

def _readme(corpus):
    return (corpus / "bigdatalog_inline" / "README.md").read_text()


def _tuples(text):
    return sorted(tuple(int(x) for x in m.split(",")) for m in re.findall(r"\((-?\d+(?:,-?\d+)*)\)", text))


def _answer(readme, section, key):
    """The answer on the README line `- <key> -> ...` below the heading line starting `section`:
    tuples `(a,b)(c,d)` or a set of values `{a,b}` (as 1-tuples)."""
    part = readme[readme.index(section):]
    for line in part.splitlines():
        if line.startswith(f"- {key} ->"):
            answer = line.split("->", 1)[1].split("[note")[0]
            values = re.search(r"\{([^}]*)\}", answer)
            if values:
                return sorted((int(v),) for v in values.group(1).split(","))
            return _tuples(answer)
    raise KeyError(key)


def _edges(spark, corpus, name, weighted):
    schema = "Src int, Dst int, Cost int" if weighted else "Src int, Dst int"
    spark.read.schema(schema).csv(str(corpus / "bigdatalog_inline" / f"{name}.csv")).createOrReplaceTempView("arc")


TC = """WITH recursive tc (A, B) AS (SELECT Src, Dst FROM arc)
  UNION (SELECT tc.A, arc.Dst FROM tc, arc WHERE tc.B = arc.Src) SELECT A, B FROM tc"""
TC_NONLINEAR = """WITH recursive tc (A, B) AS (SELECT Src, Dst FROM arc)
  UNION (SELECT x.A, y.B FROM tc x, tc y WHERE x.B = y.A) SELECT A, B FROM tc"""
REACH = """WITH recursive reach (A) AS (SELECT {start})
  UNION (SELECT arc.Dst FROM reach, arc WHERE reach.A = arc.Src) SELECT A FROM reach"""
APSP = """WITH recursive sp (X, Y, min() AS D) AS (SELECT Src, Dst, Cost FROM arc)
  UNION (SELECT sp.X, arc.Dst, sp.D + arc.Cost FROM sp, arc WHERE sp.Y = arc.Src) SELECT X, Y, D FROM sp"""
SSSP = """WITH recursive sp (X, min() AS D) AS (SELECT {start}, 0)
  UNION (SELECT arc.Dst, sp.D + arc.Cost FROM sp, arc WHERE sp.X = arc.Src) SELECT X, D FROM sp"""
CC = """WITH recursive cc3 (X, min() AS V) AS (SELECT Src, Src FROM arc)
  UNION (SELECT arc.Dst, cc3.V FROM cc3, arc WHERE cc3.X = arc.Src)
  SELECT count(DISTINCT V) FROM cc3"""
SG = """WITH recursive sg (X, Y) AS (SELECT a.Dst, b.Dst FROM arc a, arc b WHERE a.Src = b.Src AND a.Dst <> b.Dst)
  UNION (SELECT a.Dst, b.Dst FROM arc a, sg, arc b WHERE a.Src = sg.X AND b.Src = sg.Y) SELECT X, Y FROM sg"""
THREE = """WITH recursive three (A, B, C) AS (SELECT a1.Src, a1.Dst, a2.Dst FROM arc a1, arc a2 WHERE a1.Dst = a2.Src)
  UNION (SELECT three2.A, three2.B, arc.Dst FROM three2, arc WHERE three2.C = arc.Src),
  three2 (A, B, C) AS (SELECT three.A, three.B, arc.Dst FROM three, arc WHERE three.C = arc.Src)
  SELECT A, B, C FROM three"""

INLINE = [
    ("tc-graph1", TC, "graph1", False, {}, ("Transitive closure", "graph1")),
    ("tc-graph2", TC, "graph2", False, {}, ("Transitive closure", "graph2")),
    ("tc-nonlinear-graph2", TC_NONLINEAR, "graph2", False, {}, ("Transitive closure", "graph2")),
    ("reach-graph1", REACH, "graph1", False, {"start": 0}, ("Reach", "graph1, start 0")),
    ("reach-graph2", REACH, "graph2", False, {"start": 1}, ("Reach", "graph2, start 1")),
    ("apsp-graph1b", APSP, "graph1b_weighted", True, {}, ("All-pairs", "graph1b_weighted")),
    ("apsp-graph3", APSP, "graph3_weighted", True, {}, ("All-pairs", "graph3_weighted")),
    ("apsp-graph4", APSP, "graph4_weighted", True, {}, ("All-pairs", "graph4_weighted")),
    ("apsp-graph5", APSP, "graph5_weighted", True, {}, ("All-pairs", "graph5_weighted")),
    ("sssp-graph1b", SSSP, "graph1b_weighted", True, {"start": 0}, ("Single-source", "graph1b_weighted from 0")),
    ("sssp-graph3", SSSP, "graph3_weighted", True, {"start": 1}, ("Single-source", "graph3_weighted from 1")),
    ("sssp-graph4", SSSP, "graph4_weighted", True, {"start": 0}, ("Single-source", "graph4_weighted from 0")),
    ("sg-pc1", SG, "parent_child1", False, {}, ("Same generation", "parent_child1")),
    ("sg-pc2", SG, "parent_child2", False, {}, ("Same generation", "parent_child2")),
    ("mutual-graph1", THREE, "graph1", False, {}, ("Mutual recursion", "graph1")),
    ("mutual-graph2", THREE, "graph2", False, {}, ("Mutual recursion", "graph2")),
]


@pytest.mark.parametrize("query,graph,weighted,kwargs,where", [c[1:] for c in INLINE], ids=[c[0] for c in INLINE])
def test_bigdatalog_inline(spark, corpus, query, graph, weighted, kwargs, where):
    expected = _answer(_readme(corpus), *where)
    _edges(spark, corpus, graph, weighted)
    try:
        got = rows(recsql.sql(query, spark=spark, **kwargs))
    finally:
        spark.catalog.dropTempView("arc")
    assert got == expected


def test_bigdatalog_inline_cc_graph1b(spark, corpus):
    _edges(spark, corpus, "graph1b", False)
    try:
        assert rows(recsql.sql(CC, spark=spark)) == [(1,)]
    finally:
        spark.catalog.dropTempView("arc")


def test_bigdatalog_answer_sizes(corpus):
    readme = _readme(corpus)
    assert len(_answer(readme, "Transitive closure", "graph1")) == 30
    assert len(_answer(readme, "Transitive closure", "graph2")) == 26
    assert len(_answer(readme, "Mutual recursion", "graph2")) == 23


def test_radlog_coalesce_with_aliased_view(spark, corpus):
    """The coalesce program with its view's column named in the SELECT instead of a column list."""
    query, schemas = load_query(corpus / "queries" / "radlog_coalesce.sql")
    query = query.replace("CREATE VIEW lstart(T)\nAS  (SELECT a.S FROM",
                          "CREATE VIEW lstart\nAS  (SELECT a.S AS T FROM")
    assert "a.S AS T" in query
    register_csv(spark, "inter", schemas["inter"], corpus / "testdata" / "coalesce.csv")
    try:
        with pytest.warns(UserWarning, match="temporary"):
            df = recsql.script(query, spark=spark).df
        compare(rows(df), expected_rows(corpus / "results" / "coalesce_coalesce.csv"))
    finally:
        spark.catalog.dropTempView("inter")
        spark.catalog.dropTempView("lstart")


# ------------------------------------------------- demand: the corpus's queries, filtered
# (query file, table, csv, result, the filtered column: its position in the result, its name,
# whether the filter reaches the recursion's base branches)
DEMAND_CASES = [
    ("radlog_tc_ll.sql", "arc", "arc.csv", "tc_ll_arc.csv", 0, "A", True),
    ("radlog_tc_ll.sql", "arc", "arc.csv", "tc_ll_arc.csv", 1, "B", True),  # backwards
    ("radlog_apsp.sql", "warc", "s1.csv", "apsp_s1.csv", 0, "From", True),
    ("radlog_apsp.sql", "warc", "s1.csv", "apsp_s1.csv", 1, "To", False),
    # `SELECT X, B, Cnt FROM paths, rc`: X is unqualified beside a second table (not pushed)
    ("radlog_count_paths_all.sql", "rc", "rc2.csv", "count_paths_all_rc2.csv", 0, "X", False),
]


@pytest.mark.parametrize("qfile,table,csv,result,position,column,pushed", DEMAND_CASES,
                         ids=[f"{c[0].removesuffix('.sql')}-{c[5]}" for c in DEMAND_CASES])
def test_radlog_query_filtered(spark, corpus, qfile, table, csv, result, position, column, pushed):
    """The corpus query with `WHERE column IN (two values)` on its final SELECT answers RaDlog's
    expected rows for those values; the filter reaches the base branches where it is sound."""
    query, schemas = load_query(corpus / "queries" / qfile)
    expected = expected_rows(corpus / "results" / result)
    values = sorted({r[position] for r in expected})[:2]
    statement = sqlglot.parse_one(query, read="rasql")
    statement = statement.where(exp.In(this=exp.column(column, quoted=True),
                                       expressions=[exp.Literal.number(v) for v in values]))
    register_csv(spark, table, schemas[table], corpus / "testdata" / csv)
    try:
        run = recsql.run(statement.sql("rasql"), spark=spark)
        compare(rows(run.df), [r for r in expected if r[position] in values])
        assert ("demand: pushed" in run.plan.demand[0]) == pushed, run.plan.demand
    finally:
        spark.catalog.dropTempView(table)


def test_radlog_closure_read_at_both_ends(spark, corpus):
    """RaDlog's left-linear closure, its final SELECT read twice (a UNION of one read filtered on
    the source and one on the target): RaDlog's rows for either, the second read on its own copy
    of the recursion, evaluated backwards."""
    query, schemas = load_query(corpus / "queries" / "radlog_tc_ll.sql")
    expected = expected_rows(corpus / "results" / "tc_ll_arc.csv")
    source, target = expected[0][0], expected[-1][1]
    statement = sqlglot.parse_one(query, read="rasql")
    final = statement.copy()
    final.set("with_", None)
    union = exp.union(final.copy().where(f"A = {source}"), final.copy().where(f"B = {target}"))
    union.set("with_", statement.args["with_"].copy())
    register_csv(spark, "arc", schemas["arc"], corpus / "testdata" / "arc.csv")
    try:
        run = recsql.run(union.sql("rasql"), spark=spark)
        compare(rows(run.df), [r for r in expected if r[0] == source or r[1] == target])
        assert run.plan.demand[0].startswith(f"demand: pushed A = {source} into the base branches of tc")
        assert run.plan.demand[1].startswith(f"demand: pushed B = {target} into the base branches of "
                                             "tc__demand1, evaluated backwards")
    finally:
        spark.catalog.dropTempView("arc")
