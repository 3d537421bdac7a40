"""Statements around the query (DIALECT section 4), parameters, EXPLAIN, settings, hygiene."""

from __future__ import annotations

import re

import oracles
import pytest
from conftest import rows

import recsql

EDGE = [(1, 2, 3), (2, 3, 4), (1, 3, 9), (3, 4, 1), (4, 2, 1), (5, 6, 1)]
SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT {src}, 0)
  UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src)
SELECT Dst, Cost FROM path"""


def sssp(source):
    return sorted(oracles.dijkstra(EDGE, source).items())


@pytest.fixture
def edge(view):
    return view("edge", EDGE, "Src int, Dst int, Cost int")


# ------------------------------------------------------------------------------ parameters

def test_named_parameter_marker(spark, edge):
    q = SSSP.replace("{src}", ":src")
    assert rows(recsql.sql(q, args={"src": 1}, spark=spark)) == sssp(1)
    assert rows(recsql.sql(q, args={"src": 2}, spark=spark)) == sssp(2)


def test_parameter_marker_in_recursive_branch(spark, edge):
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT :src, 0)
      UNION (SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge
             WHERE path.Dst = edge.Src AND edge.Cost <= :cap)
    SELECT Dst, Cost FROM path"""
    got = rows(recsql.sql(q, args={"src": 1, "cap": 3}, spark=spark))
    assert got == sorted(oracles.dijkstra([e for e in EDGE if e[2] <= 3], 1).items())


def test_keyword_placeholder_value(spark, edge):
    assert rows(recsql.sql(SSSP, src=1, spark=spark)) == sssp(1)


def test_keyword_placeholder_dataframe(spark):
    df = spark.createDataFrame(EDGE, "Src int, Dst int, Cost int")
    q = """WITH recursive path (Dst, min() AS Cost) AS (SELECT {src}, 0)
      UNION (SELECT e.Dst, path.Cost + e.Cost FROM path, {edges} e WHERE path.Dst = e.Src)
    SELECT Dst, Cost FROM path"""
    assert rows(recsql.sql(q, src=2, edges=df, spark=spark)) == sssp(2)


def test_keyword_placeholder_string_value_is_quoted(spark, view):
    view("named", [("a", "b"), ("b", "c"), ("x", "y")], "Src string, Dst string")
    q = """WITH RECURSIVE r (N) AS (SELECT {start} UNION SELECT named.Dst FROM r JOIN named ON r.N = named.Src)
           SELECT N FROM r"""
    assert rows(recsql.sql(q, start="a", spark=spark)) == [("a",), ("b",), ("c",)]


def test_unbound_placeholder_is_a_clear_error(spark, edge):
    with pytest.raises(recsql.RecSQLError) as info:
        recsql.sql(SSSP, other=1, spark=spark)
    assert "src" in str(info.value)


# ------------------------------------------------------------------------------ statements

def test_create_temp_view_with_recursive_body(spark, edge):
    try:
        recsql.sql("CREATE OR REPLACE TEMP VIEW sp_view AS " + SSSP.replace("{src}", "1"), spark=spark)
        assert rows(recsql.sql("SELECT * FROM sp_view", spark=spark)) == sssp(1)
        assert rows(recsql.sql("SELECT Dst FROM sp_view WHERE Cost > 3", spark=spark)) == [
            (d,) for d, c in sssp(1) if c > 3]
        with pytest.raises(Exception, match="RECSQL_RECURSIVE_VIEW"):  # plain Spark: not silently
            spark.table("sp_view").collect()
    finally:
        spark.catalog.dropTempView("sp_view")


def test_create_view_recursive_over_temp_view_warns_and_registers_temp_view(spark, edge):
    try:
        with pytest.warns(UserWarning, match="refers to temporary view edge"):
            recsql.sql("CREATE VIEW sp_perm AS " + SSSP.replace("{src}", "1"), spark=spark)
        assert rows(recsql.sql("SELECT * FROM sp_perm", spark=spark)) == sssp(1)
        assert any(t.name == "sp_perm" and t.isTemporary for t in spark.catalog.listTables())
    finally:
        spark.catalog.dropTempView("sp_perm")


def test_create_view_over_temp_objects_warns(spark, edge):
    try:
        with pytest.warns(UserWarning, match="temporary"):
            recsql.sql("CREATE VIEW cheap_edges AS SELECT Src, Dst FROM edge WHERE Cost < 4", spark=spark)
        assert rows(spark.table("cheap_edges")) == sorted((s, d) for s, d, c in EDGE if c < 4)
    finally:
        spark.catalog.dropTempView("cheap_edges")


def test_create_table_using_parquet_as_recursive(spark, edge):
    try:
        recsql.sql("CREATE TABLE sp_table USING parquet AS " + SSSP.replace("{src}", "1"), spark=spark)
        assert rows(spark.table("sp_table")) == sssp(1)
        assert not spark.catalog.getTable("sp_table").isTemporary
    finally:
        spark.sql("DROP TABLE IF EXISTS sp_table")


def test_insert_into_and_overwrite_with_recursive_query(spark, edge):
    try:
        spark.sql("CREATE TABLE sp_ins (Dst INT, Cost INT) USING parquet")
        recsql.sql("INSERT INTO sp_ins " + SSSP.replace("{src}", "1"), spark=spark)
        recsql.sql("INSERT INTO sp_ins " + SSSP.replace("{src}", "5"), spark=spark)
        assert rows(spark.table("sp_ins")) == sorted(sssp(1) + sssp(5))
        recsql.sql("INSERT OVERWRITE sp_ins " + SSSP.replace("{src}", "2"), spark=spark)
        assert rows(spark.table("sp_ins")) == sssp(2)
    finally:
        spark.sql("DROP TABLE IF EXISTS sp_ins")


def test_script_runs_statements_in_order(spark, edge):
    text = f"""
      CREATE OR REPLACE TEMP VIEW cheap AS SELECT * FROM edge WHERE Cost < 5;
      CREATE OR REPLACE TEMP VIEW sp1 AS {SSSP.replace('{src}', '1').replace('edge', 'cheap')};
      SELECT Dst, Cost FROM sp1 WHERE Dst <> 1
    """
    try:
        result = recsql.script(text, spark=spark)
        cheap = [e for e in EDGE if e[2] < 5]
        assert rows(result.df) == sorted((d, c) for d, c in oracles.dijkstra(cheap, 1).items() if d != 1)
    finally:
        spark.catalog.dropTempView("cheap")
        spark.catalog.dropTempView("sp1")


def test_other_statements_pass_to_spark(spark, edge):
    df = recsql.sql("SHOW TABLES", spark=spark)
    assert "edge" in {r.tableName for r in df.collect()}


# ------------------------------------------------------------------------------ EXPLAIN

def test_explain_sssp_one_exchange_and_group_key(spark, edge):
    text = recsql.explain(SSSP.replace("{src}", "1"), spark=spark)
    assert "group key / partition key: (Dst)" in text
    assert "min(Cost)" in text
    assert "base" in text and "recursive" in text and "delta rule" in text
    assert "== Physical Plan ==" in text or "physical plan" in text.lower()
    # one shuffle per iteration; the base's own (REPARTITION_BY_NUM) ran once, filling its cache
    assert len(re.findall(r"Exchange hashpartitioning\([^)]*\), ENSURE_REQUIREMENTS", text)) == 1, text
    assert all("REPARTITION_BY_NUM" in line for line in text.splitlines()
               if "Exchange hashpartitioning" in line and "ENSURE_REQUIREMENTS" not in line), text


def test_explain_statement_form(spark, edge):
    df = recsql.sql("EXPLAIN " + SSSP.replace("{src}", "1"), spark=spark)
    text = "\n".join(r[0] for r in df.collect())
    assert "== Recursive plan ==" in text and "Dst" in text


def test_explain_non_recursive_goes_to_spark(spark, edge):
    text = recsql.explain("SELECT * FROM edge WHERE Src = 1", spark=spark)
    assert "Physical Plan" in text


# ------------------------------------------------------------------------------ settings

CYCLE_BAG = """WITH RECURSIVE w (N) AS (SELECT 1 UNION ALL
  SELECT edge.Dst FROM w JOIN edge ON w.N = edge.Src)
SELECT count(*) FROM w"""


DOUBLING = """WITH RECURSIVE w (N) AS (SELECT 1 UNION ALL
  SELECT loop2.Dst FROM w JOIN loop2 ON w.N = loop2.Src)
SELECT count(*) FROM w"""


def test_max_iterations_error_names_everything(spark, view):
    # two parallel self-loops: iteration k of the bag recursion yields 2**k rows
    view("loop2", [(1, 1, "a"), (1, 1, "b")], "Src int, Dst int, Tag string")
    with pytest.raises(recsql.RecSQLExecutionError) as info:
        recsql.run(DOUBLING, spark=spark, conf={"spark.recsql.maxIterations": 6})
    text = str(info.value)
    assert "spark.recsql.maxIterations" in text  # the key
    assert re.search(r"maxIterations\D{1,5}6\b", text)  # the configured limit
    assert "`w`" in text  # the CTE
    assert re.search(r"iteration 6\b", text)  # the iteration
    assert re.search(r"\b64\b", text)  # the last delta size (2**6)
    assert "Py4J" not in text


def test_max_iterations_from_session_conf(spark, edge):
    spark.conf.set("spark.recsql.maxIterations", "4")
    try:
        with pytest.raises(recsql.RecSQLError, match="spark.recsql.maxIterations"):
            recsql.sql(CYCLE_BAG, spark=spark)
    finally:
        spark.conf.unset("spark.recsql.maxIterations")


def test_max_iterations_not_reached_exactly(spark):
    q = "WITH RECURSIVE c (N) AS (SELECT 1 UNION ALL SELECT N + 1 FROM c WHERE N < 5) SELECT max(N) FROM c"
    # 4 productive iterations and one empty one
    assert rows(recsql.sql(q, spark=spark, conf={"spark.recsql.maxIterations": 6})) == [(5,)]


def test_invalid_and_unknown_settings(spark):
    q = "WITH RECURSIVE c (N) AS (SELECT 1 UNION ALL SELECT N + 1 FROM c WHERE N < 3) SELECT * FROM c"
    with pytest.raises(recsql.RecSQLError, match="maxIterations"):
        recsql.sql(q, spark=spark, conf={"spark.recsql.maxIterations": 0})
    with pytest.raises(recsql.RecSQLError, match="spark.recsql.maxIteratons"):
        recsql.sql(q, spark=spark, conf={"spark.recsql.maxIteratons": 5})


def test_stats_per_iteration(spark, edge):
    r = recsql.run(SSSP.replace("{src}", "1"), spark=spark)
    assert r.stats and all(s.cte == "path" for s in r.stats)
    iterations = [s.iteration for s in r.stats]
    assert iterations == list(range(len(iterations)))
    assert r.stats[-1].delta_rows == 0
    assert r.stats[-1].total_rows == len(sssp(1))
    assert all(s.seconds >= 0 for s in r.stats)
    assert all(isinstance(s.join_strategy, str) and isinstance(s.ran_on, str) for s in r.stats)


def test_progress_callback(spark, edge):
    seen = []
    recsql.run(SSSP.replace("{src}", "1"), spark=spark, progress=seen.append)
    assert seen and seen[-1].delta_rows == 0


# ------------------------------------------------------------------------------ hygiene

AGGREGATE_MAP = "spark.sql.codegen.aggregate.fastHashMap.capacityBit"
HYGIENE_KEYS = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions", AGGREGATE_MAP)


def _snapshot(spark):
    return {k: spark.conf.get(k, None) for k in HYGIENE_KEYS}


def test_session_settings_restored_after_run(spark, edge):
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        before = _snapshot(spark)
        df = recsql.sql(SSSP.replace("{src}", "1"), spark=spark)
        assert _snapshot(spark) == before
        assert rows(df) == sssp(1)  # the DataFrame stays valid afterwards
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")


WIDE = """WITH recursive r (X, min() AS C) AS (SELECT id, id FROM nums)
  UNION (SELECT nums.id - 1, r.C FROM r, nums WHERE r.X = nums.id AND nums.id < 3)
SELECT X, C FROM r"""


def _wide_oracle(n: int) -> set[tuple[int, int]]:
    """WIDE by a plain-Python fixpoint of its min() head."""
    best = {x: x for x in range(n)}
    changed = True
    while changed:
        changed = False
        for x, c in list(best.items()):
            if 0 <= x < 3 and c < best.get(x - 1, c + 1):
                best[x - 1] = c
                changed = True
    return set(best.items())


@pytest.mark.usefixtures("spark_loop")
@pytest.mark.parametrize("session, seen", [(None, ["16", "17"]), ("15", ["15", "15"])])
def test_iterations_size_the_aggregate_map_for_their_relation_unless_the_session_sets_it(spark, view, session,
                                                                                       seen):
    # the partial aggregates' fast hash map holds twice the relation's rows from 2^15 rows on
    # (action.py): the base step's 40,000 rows take iteration 1 to 2^17; a session's own value stays
    n = 40_000
    view("nums", [(i,) for i in range(n)], "id BIGINT")
    if session is not None:
        spark.conf.set(AGGREGATE_MAP, session)
    try:
        during = []
        res = recsql.run(WIDE, spark=spark,
                         progress=lambda s: during.append((s.iteration, spark.conf.get(AGGREGATE_MAP, None))))
        assert {tuple(r) for r in res.df.collect()} == _wide_oracle(n)
        assert [bits for i, bits in during if i <= 1] == seen
        assert spark.conf.get(AGGREGATE_MAP, None) == session  # restored, or left unset
    finally:
        spark.conf.unset(AGGREGATE_MAP)


@pytest.mark.usefixtures("spark_loop")
@pytest.mark.parametrize("shuffle, conf, expected", [
    ("200", {}, 2),  # Spark's default width, capped at one per task slot (local[2]: 2)
    ("1", {}, 1),  # below the cap: Spark's setting as it is
    ("200", {"spark.recsql.partitions": 5}, 5),  # set exactly
])
def test_state_partitions_are_the_shuffle_width_capped_at_one_per_task_slot(spark, edge, shuffle, conf,
                                                                         expected):
    assert spark.sparkContext.defaultParallelism == 2  # the suite's local[2]
    spark.conf.set("spark.sql.shuffle.partitions", shuffle)
    try:
        res = recsql.run(SSSP.replace("{src}", "1"), spark=spark, conf=conf)
        assert {s.ran_on for s in res.stats} == {"spark"}
        assert res.df.rdd.getNumPartitions() == expected  # the checkpointed state, as the loop left it
        assert rows(res.df) == sssp(1)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")


def test_session_settings_restored_after_error(spark, edge):
    before = _snapshot(spark)
    with pytest.raises(recsql.RecSQLError):
        recsql.sql(CYCLE_BAG, spark=spark, conf={"spark.recsql.maxIterations": 3})
    assert _snapshot(spark) == before
    with pytest.raises(recsql.RecSQLError):
        recsql.sql(SSSP.replace("{src}", "1").replace("path.Cost + edge.Cost", "path.Cost + edge.Cst"),
                   spark=spark)
    assert _snapshot(spark) == before


def test_no_intermediate_temp_views_left(spark, edge):
    before = {t.name for t in spark.catalog.listTables()}
    recsql.sql(SSSP.replace("{src}", "1"), spark=spark).collect()
    with pytest.raises(recsql.RecSQLError):
        recsql.sql(CYCLE_BAG, spark=spark, conf={"spark.recsql.maxIterations": 3})
    assert {t.name for t in spark.catalog.listTables()} == before


# ------------------------------------------------------------------------------ long chain

def test_long_chain_300_iterations(spark, view):
    n = 300
    view("chain", [(i, i + 1) for i in range(n)], "Src int, Dst int")
    q = """WITH RECURSIVE reach (X) AS (SELECT 0 UNION SELECT chain.Dst FROM reach JOIN chain ON reach.X = chain.Src)
           SELECT count(*), max(X) FROM reach"""
    r = recsql.run(q, spark=spark)
    assert rows(r.df) == [(n + 1, n)]
    assert max(s.iteration for s in r.stats) >= n
