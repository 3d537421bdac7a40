"""Recursive views (DIALECT section 1): stored definitions, expanded in every statement that reads
them through recsql, visible from every session, refused by plain Spark. Answers come from
networkx / a plain-Python fixpoint, never from recsql."""

from __future__ import annotations

import networkx as nx
import oracles
import pytest
from conftest import rows, unique_name

import recsql

EDGE = [(1, 2, 3), (2, 3, 4), (1, 3, 9), (3, 4, 1), (4, 2, 1), (5, 6, 1)]
MORE = [(4, 5, 2)]
SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT views_edge.Dst, path.Cost + views_edge.Cost FROM path, views_edge
         WHERE path.Dst = views_edge.Src)
SELECT Dst, Cost FROM path"""


def sssp(edges, source=1):
    return sorted(oracles.dijkstra(edges, source).items())


def reachable(edges, sources):
    graph = nx.DiGraph([(s, d) for s, d, _ in edges])
    found = set(sources)
    for source in sources:
        if source in graph:
            found |= nx.descendants(graph, source)
    return sorted((n,) for n in found)


@pytest.fixture
def edge_table(spark):
    """`views_edge`, a real (parquet) table: a permanent view may read it."""
    spark.sql("DROP TABLE IF EXISTS views_edge")
    spark.createDataFrame(EDGE, "Src int, Dst int, Cost int").write.saveAsTable("views_edge")
    created = []
    yield created
    for name in reversed(created):
        spark.sql(f"DROP VIEW IF EXISTS {name}")
    spark.sql("DROP TABLE IF EXISTS views_edge")


def test_a_recursive_view_is_a_definition_every_session_reads(spark, edge_table):
    edge_table.append("sp")
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    assert rows(recsql.sql("SELECT * FROM sp", spark=spark)) == sssp(EDGE)
    other = spark.newSession()
    assert rows(recsql.sql("SELECT Dst, Cost FROM sp", spark=other)) == sssp(EDGE)
    # a definition, not a snapshot: a new edge changes what it reads (in the writing session:
    # another one caches the table's file list until it refreshes it, as Spark does)
    spark.createDataFrame(MORE, "Src int, Dst int, Cost int").write.insertInto("views_edge")
    assert rows(recsql.sql("SELECT * FROM sp", spark=spark)) == sssp(EDGE + MORE)
    listed = {r.tableName: r.isTemporary for r in spark.sql("SHOW TABLES").collect()}
    assert listed.get("sp") is False
    assert [tuple(r) for r in spark.sql("DESCRIBE sp").collect()] == [("Dst", "int", None),
                                                                       ("Cost", "int", None)]


@pytest.fixture(scope="module")
def stored_sp(spark):
    """`sp_ro` over `views_edge_ro`, made once for the tests that only read it with plain Spark."""
    spark.sql("DROP TABLE IF EXISTS views_edge_ro")
    spark.createDataFrame(EDGE, "Src int, Dst int, Cost int").write.saveAsTable("views_edge_ro")
    recsql.sql("CREATE VIEW sp_ro AS " + SSSP.replace("views_edge", "views_edge_ro"), spark=spark)
    yield
    spark.sql("DROP VIEW IF EXISTS sp_ro")
    spark.sql("DROP TABLE IF EXISTS views_edge_ro")


@pytest.mark.parametrize("query", [
    "SELECT * FROM sp_ro",
    "SELECT count(*) FROM sp_ro",
    "SELECT 1 FROM sp_ro LIMIT 1",
    "SELECT Dst FROM sp_ro WHERE Dst = 1",
    "SELECT Dst FROM sp_ro WHERE Cost IS NULL",
    "SELECT DISTINCT 1 FROM sp_ro",
    "SELECT count(Dst) FROM sp_ro",
    "SELECT max(Cost) FROM sp_ro",
    "SELECT 1 WHERE EXISTS (SELECT * FROM sp_ro)",
    "SELECT count(*) FROM range(3) r LEFT JOIN sp_ro ON true",
    "SELECT * FROM views_edge_ro e JOIN sp_ro ON e.Dst = sp_ro.Dst",
])
def test_plain_spark_refuses_to_read_it(spark, stored_sp, query):
    with pytest.raises(Exception, match="RECSQL_RECURSIVE_VIEW.*read it through recsql"):
        spark.sql(query).collect()


@pytest.mark.parametrize("query, expected", [
    ("SELECT Dst FROM sp_ro WHERE false", []),
    ("SELECT count(*) FROM sp_ro WHERE false", [(0,)]),
    ("SELECT * FROM sp_ro LIMIT 0", []),
])
def test_plain_spark_answers_only_what_needs_no_row_of_it(spark, stored_sp, query, expected):
    """Spark's optimizer drops the view from these plans; their answers are still right."""
    assert rows(spark.sql(query)) == expected


def test_non_recursive_statements_read_it_through_recsql(spark, edge_table):
    edge_table.append("sp")
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    expected = sssp(EDGE)
    assert rows(recsql.sql("SELECT count(*), sum(Cost) FROM sp", spark=spark)) == [
        (len(expected), sum(c for _, c in expected))]
    assert rows(recsql.sql("SELECT 1 FROM sp LIMIT 1", spark=spark)) == [(1,)]
    got = recsql.sql("SELECT e.Src, sp.Cost FROM views_edge e JOIN default.sp ON e.Dst = sp.Dst "
                     "WHERE sp.Cost > 3", spark=spark)
    assert rows(got) == sorted((s, dict(expected)[d]) for s, d, _ in EDGE
                               if d in dict(expected) and dict(expected)[d] > 3)
    assert rows(recsql.sql("SELECT Dst FROM views_edge WHERE Dst IN (SELECT Dst FROM sp WHERE Cost < 4)",
                           spark=spark)) == sorted((d,) for _, d, _ in EDGE if dict(expected).get(d, 99) < 4)
    try:
        recsql.sql("CREATE TABLE views_sp_copy USING parquet AS SELECT * FROM sp", spark=spark)
        recsql.sql("INSERT INTO views_sp_copy SELECT Dst, Cost + 100 FROM sp", spark=spark)
        assert rows(spark.table("views_sp_copy")) == sorted(expected + [(d, c + 100) for d, c in expected])
    finally:
        spark.sql("DROP TABLE IF EXISTS views_sp_copy")


def test_views_of_views_and_a_recursive_view_reading_another(spark, edge_table):
    edge_table += ["sp", "cheap", "reach"]
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    recsql.sql("CREATE VIEW cheap AS SELECT Dst AS Node FROM sp WHERE Cost <= 4", spark=spark)
    recsql.sql("""CREATE VIEW reach AS WITH recursive r (N) AS (SELECT Node FROM cheap)
                  UNION (SELECT e.Dst FROM r, views_edge e WHERE r.N = e.Src) SELECT N FROM r""",
               spark=spark)
    cheap = [d for d, c in sssp(EDGE) if c <= 4]
    assert rows(recsql.sql("SELECT * FROM cheap", spark=spark)) == sorted((n,) for n in cheap)
    assert rows(recsql.sql("SELECT * FROM reach", spark=spark)) == reachable(EDGE, cheap)
    with pytest.raises(Exception, match="RECSQL_RECURSIVE_VIEW"):  # the non-recursive one too
        spark.table("cheap").collect()
    # the reader's own CTE named like the view's CTE does not meet it
    got = recsql.sql("WITH path AS (SELECT 42 AS x) SELECT x, (SELECT count(*) FROM reach) FROM path",
                     spark=spark)
    assert rows(got) == [(42, len(reachable(EDGE, cheap)))]


def test_replace_if_not_exists_and_drop_behave_as_in_spark(spark, edge_table):
    edge_table.append("sp")
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    with pytest.raises(recsql.RecSQLError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        recsql.sql("CREATE VIEW sp AS " + SSSP.replace("SELECT 1, 0", "SELECT 5, 0"), spark=spark)
    recsql.sql("CREATE VIEW IF NOT EXISTS sp AS " + SSSP.replace("SELECT 1, 0", "SELECT 5, 0"), spark=spark)
    assert rows(recsql.sql("SELECT * FROM sp", spark=spark)) == sssp(EDGE, 1)
    recsql.sql("CREATE OR REPLACE VIEW sp AS " + SSSP.replace("SELECT 1, 0", "SELECT 5, 0"), spark=spark)
    assert rows(recsql.sql("SELECT * FROM sp", spark=spark)) == sssp(EDGE, 5)
    recsql.sql("DROP VIEW sp", spark=spark)
    with pytest.raises(recsql.RecSQLError, match="TABLE_OR_VIEW_NOT_FOUND"):
        recsql.sql("SELECT * FROM sp", spark=spark)


def test_qualified_names_and_column_lists(spark, edge_table):
    spark.sql("CREATE DATABASE IF NOT EXISTS views_db")
    edge_table += ["views_db.sp", "views_db.renamed"]
    try:
        recsql.sql("CREATE VIEW views_db.sp AS " + SSSP, spark=spark)
        recsql.sql("CREATE VIEW `views_db`.`renamed` (node, dist) AS " + SSSP, spark=spark)
        for name in ["views_db.sp", "`views_db`.`sp`", "spark_catalog.views_db.sp"]:
            assert rows(recsql.sql(f"SELECT * FROM {name}", spark=spark)) == sssp(EDGE), name
        assert rows(recsql.sql("SELECT node, dist FROM views_db.renamed r WHERE r.dist > 3",
                               spark=spark)) == [(d, c) for d, c in sssp(EDGE) if c > 3]
        assert [c.name for c in spark.catalog.listColumns("renamed", "views_db")] == ["node", "dist"]
    finally:
        for name in ["views_db.sp", "views_db.renamed"]:
            spark.sql(f"DROP VIEW IF EXISTS {name}")
        spark.sql("DROP DATABASE IF EXISTS views_db")


def test_temp_view_is_per_session_and_shadows(spark, edge_table):
    edge_table.append("sp")
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    mine, other = spark.newSession(), spark.newSession()
    recsql.sql("CREATE TEMP VIEW sp AS " + SSSP.replace("SELECT 1, 0", "SELECT 2, 0"), spark=mine)
    assert rows(recsql.sql("SELECT * FROM sp", spark=mine)) == sssp(EDGE, 2)
    assert rows(recsql.sql("SELECT * FROM sp", spark=other)) == sssp(EDGE, 1)
    recsql.sql("CREATE TEMP VIEW only_mine AS " + SSSP, spark=mine)
    with pytest.raises(recsql.RecSQLError, match="TABLE_OR_VIEW_NOT_FOUND"):
        recsql.sql("SELECT * FROM only_mine", spark=other)
    with pytest.raises(recsql.RecSQLError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        recsql.sql("CREATE TEMP VIEW only_mine AS " + SSSP, spark=mine)
    # a view plain Spark derives from it is not taken for it: read through recsql, it still fails
    mine.sql("CREATE TEMP VIEW derived AS SELECT * FROM only_mine WHERE Cost > 3")
    with pytest.raises(Exception, match="RECSQL_RECURSIVE_VIEW"):
        recsql.sql("SELECT * FROM derived", spark=mine).collect()


def test_a_view_cannot_keep_parameters(spark, edge_table):
    with pytest.raises(recsql.RecSQLError, match="RECSQL_VIEW_WITH_PARAMETERS"):
        recsql.sql("CREATE VIEW sp AS " + SSSP.replace("SELECT 1, 0", "SELECT :src, 0"),
                   args={"src": 1}, spark=spark)


def test_a_view_plain_spark_alters_is_what_spark_now_holds(spark, edge_table):
    edge_table.append("sp")
    recsql.sql("CREATE VIEW sp AS " + SSSP, spark=spark)
    spark.sql("ALTER VIEW sp AS SELECT Src AS Dst, Cost FROM views_edge WHERE Cost > 3")
    assert rows(recsql.sql("SELECT * FROM sp", spark=spark)) == sorted((s, c) for s, _, c in EDGE if c > 3)


def test_a_tool_comment_with_braces_before_a_read_of_a_recursive_view(spark, edge_table):
    """dbt prefixes every statement with `/* {"app": "dbt", ...} */`; the braces must not reach
    pyspark's `{name}` formatting of the expanded statement (was KeyError '"app"')."""
    edge_table.append("sp_commented")
    recsql.sql("CREATE VIEW sp_commented AS " + SSSP, spark=spark)
    query = '/* {"app": "dbt", "node_id": "test.x"} */\nSELECT Dst, Cost FROM sp_commented WHERE Cost > 3'
    assert rows(recsql.sql(query, spark=spark)) == [(d, c) for d, c in sssp(EDGE) if c > 3]


def test_a_with_nested_in_the_final_query_reads_a_recursive_view(spark, edge_table):
    """dbt's relationships test wraps a WITH in a subquery; its CTEs read a recursive view, whose
    expansion makes the statement recsql's (was TABLE_OR_VIEW_NOT_FOUND for `child`)."""
    edge_table.append("sp_nested")
    recsql.sql("CREATE VIEW sp_nested AS " + SSSP, spark=spark)
    query = """SELECT count(*) AS failures FROM (
        WITH child AS (SELECT Dst AS from_field FROM sp_nested WHERE Dst IS NOT NULL),
             parent AS (SELECT Src AS to_field FROM views_edge)
        SELECT from_field FROM child LEFT JOIN parent ON child.from_field = parent.to_field
        WHERE parent.to_field IS NULL) dbt_internal_test"""
    sources = {s for s, _, _ in EDGE}
    assert rows(recsql.sql(query, spark=spark)) == [(sum(d not in sources for d, _ in sssp(EDGE)),)]


# -- creating a recursive view types its columns without running the recursion ---------------

DAG = [(1, 2, 3, "1.50", "a"), (1, 3, 1, "0.25", "b"), (2, 4, 2, "2.00", "c"), (3, 4, 7, "1.00", "d"),
       (4, 5, 1, "0.50", "e"), (3, 5, 9, "3.75", "f")]
TYPED = {
    "min": """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
                UNION (SELECT e.Dst, path.Cost + e.Cost FROM path, typing_dag e WHERE path.Dst = e.Src)
              SELECT Dst, Cost FROM path""",
    # count()/sum() heads take Spark's sum type: int -> bigint, decimal(p, s) -> decimal(38, s)
    "count": """WITH recursive paths (Dst, count() AS N) AS (SELECT 1, 1)
                  UNION (SELECT e.Dst, paths.N FROM paths, typing_dag e WHERE paths.Dst = e.Src)
                SELECT Dst, N FROM paths""",
    "sum_decimal": """WITH recursive w (Dst, sum() AS Total) AS (SELECT 1, CAST(1.5 AS DECIMAL(5, 2)))
                        UNION (SELECT e.Dst, w.Total FROM w, typing_dag e WHERE w.Dst = e.Src)
                      SELECT Dst, Total FROM w""",
    "payload": """WITH recursive path (Dst, min() AS Cost, argmin(Cost) AS Pred, argmin(Cost) AS Via)
                    AS (SELECT 1, CAST(0 AS BIGINT), 1, 'start')
                    UNION (SELECT e.Dst, path.Cost + e.Cost, e.Src, e.Name FROM path, typing_dag e
                           WHERE path.Dst = e.Src)
                  SELECT * FROM path""",
    "min_by": """WITH RECURSIVE path (dst, cost, pred) AS (SELECT 1, 0.0D, 1 UNION
                   SELECT e.Dst, MIN(p.cost + e.W), MIN_BY(e.Src, p.cost + e.W)
                   FROM path p JOIN typing_dag e ON p.dst = e.Src GROUP BY e.Dst)
                 SELECT dst, cost, pred FROM path""",
    "search_cycle": """WITH RECURSIVE walk(f, t) AS (SELECT Src, Dst FROM typing_dag WHERE Src = 1
                         UNION ALL SELECT e.Src, e.Dst FROM typing_dag e, walk w WHERE e.Src = w.t)
                       SEARCH DEPTH FIRST BY f, t SET seq
                       CYCLE f, t SET looped TO 'Y' DEFAULT 'N' USING trail
                       SELECT * FROM walk""",
    "breadth_first": """WITH RECURSIVE walk(node) AS (SELECT Dst FROM typing_dag WHERE Src = 1
                          UNION SELECT e.Dst FROM walk w, typing_dag e WHERE e.Src = w.node)
                        SEARCH BREADTH FIRST BY node SET seq CYCLE node SET is_cycle USING path
                        SELECT node, seq, is_cycle, path FROM walk""",
    "mutual_and_final_aggregates": """WITH recursive ev (N, min() AS C) AS (SELECT 1, 0)
                    UNION (SELECT e.Dst, od.C + e.W FROM od, typing_dag e WHERE od.N = e.Src),
                  od (N, min() AS C) AS (SELECT e.Dst, ev.C + e.Cost FROM ev, typing_dag e WHERE ev.N = e.Src),
                  both AS (SELECT N, C, 'even' AS kind FROM ev UNION ALL SELECT N, C, 'odd' FROM od)
                  SELECT kind, count(*) AS n, sum(C) AS s, avg(N) AS a, collect_list(N) AS ns
                  FROM both GROUP BY kind""",
    # recsql widens as a UNION does (Spark refuses: CANNOT_MERGE_INCOMPATIBLE_DATA_TYPE)
    "union_all_widening": """WITH RECURSIVE r (n, label) AS (SELECT 1, 'x'
                               UNION ALL SELECT n + CAST(1 AS BIGINT), concat(label, 'y') FROM r WHERE n < 5)
                             SELECT n, label FROM r""",
    # decimal(10, 2) + decimal(5, 2) is decimal(11, 2): each step widens (Spark refuses)
    "decimal_growth": """WITH RECURSIVE walk (node, cost) AS (SELECT 1, CAST(0 AS DECIMAL(10, 2))
                           UNION ALL SELECT e.Dst, w.cost + e.W FROM walk w JOIN typing_dag e ON w.node = e.Src)
                         SELECT node, cost FROM walk""",
}
# what Spark's own WITH RECURSIVE expresses: its types are the oracle too
SPARK_TYPED = {
    "union_all": """WITH RECURSIVE r (n, label) AS (SELECT CAST(1 AS BIGINT), 'x'
                      UNION ALL SELECT n + 1, concat(label, 'y') FROM r WHERE n < 5)
                    SELECT n, label, n / 2 AS half FROM r""",
    "trail": """WITH RECURSIVE walk (node, cost, trail) AS (SELECT 1, CAST(0 AS DECIMAL(10, 2)), array(1)
                  UNION ALL SELECT e.Dst, CAST(w.cost + e.W AS DECIMAL(10, 2)), concat(w.trail, array(e.Dst))
                  FROM walk w JOIN typing_dag e ON w.node = e.Src)
                SELECT node, cost, trail, size(trail) AS hops FROM walk""",
}


@pytest.fixture(scope="module")
def typing_dag(spark):
    spark.sql("DROP TABLE IF EXISTS typing_dag")
    spark.createDataFrame(DAG, "Src int, Dst int, Cost int, W string, Name string") \
        .selectExpr("Src", "Dst", "Cost", "CAST(W AS DECIMAL(5, 2)) AS W", "Name") \
        .write.saveAsTable("typing_dag")
    yield
    spark.sql("DROP TABLE IF EXISTS typing_dag")


def _types(schema) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


@pytest.mark.parametrize("name", [*TYPED, *SPARK_TYPED])
def test_a_view_has_the_types_its_evaluated_query_has(spark, typing_dag, name):
    """CREATE VIEW analyses the recursive query instead of running it (it runs no iteration);
    the view's columns are still exactly what evaluating the query gives, and, where Spark can
    express the query, what Spark's own evaluation gives."""
    query = {**TYPED, **SPARK_TYPED}[name]
    evaluated = recsql.sql(query, spark=spark)
    evaluated.collect()  # the run's own types, not only its plan's
    expected = _types(evaluated.schema)
    if name in SPARK_TYPED:
        assert _types(spark.sql(query).schema) == expected
    view = f"typed_{name}"
    try:
        for kind in ("TEMP VIEW", "VIEW"):
            result = recsql.run(f"CREATE OR REPLACE {kind} {view} AS {query}", spark=spark)
            assert result.stats == []
            assert _types(spark.table(view).schema) == expected, kind
            described = [(r[0], r[1]) for r in spark.sql(f"DESCRIBE {view}").collect()]
            assert described == expected, kind
            assert _types(recsql.sql(f"SELECT * FROM {view}", spark=spark).schema) == expected
            spark.sql(f"DROP VIEW {view}") if kind == "TEMP VIEW" else None
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {view}")


def test_creating_a_view_runs_no_iteration_and_no_spark_job(spark, view):
    """A chain of 40 edges needs 40 iterations: with maxIterations at 5 reading the view fails,
    creating it does not (it is analysed, not evaluated), and it runs no Spark job at all."""
    view("typing_chain", [(i, i + 1) for i in range(40)], "Src int, Dst int")
    query = """WITH recursive tc (X, Y) AS (SELECT Src, Dst FROM typing_chain)
                 UNION (SELECT tc.X, e.Dst FROM tc, typing_chain e WHERE tc.Y = e.Src)
               SELECT X AS node, Y AS reached FROM tc"""
    conf = {"spark.recsql.maxIterations": "5"}
    seen = []
    group = unique_name("create_view_jobs")
    spark.sparkContext.setJobGroup(group, "CREATE VIEW of a recursive query")
    try:
        result = recsql.run(f"CREATE OR REPLACE TEMP VIEW chain_closure AS {query}", spark=spark,
                            conf=conf, progress=seen.append)
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    try:
        assert result.stats == [] and seen == [] and jobs == []
        with pytest.raises(recsql.RecSQLError, match="RECSQL_MAX_ITERATIONS"):
            recsql.sql("SELECT count(*) FROM chain_closure", spark=spark, conf=conf).collect()
        got = rows(recsql.sql("SELECT reached FROM chain_closure WHERE node = 30", spark=spark))
        assert got == [(n,) for n in range(31, 41)]
    finally:
        spark.catalog.dropTempView("chain_closure")
