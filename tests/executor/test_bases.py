"""Base tables kept across statements (`recsql.executor.state.bases`): a later statement over the same
unchanged table joins the kept pre-partitioned copy (the Spark loop) or reads the kept driver
copy (the default path, where these small fixpoints run wholly on the driver), and any change to
the table (its files, the view's DataFrame) gives a fresh copy, with every answer checked against
networkx."""

from __future__ import annotations

import logging

import networkx as nx
import pytest
from conftest import unique_name

import recsql
from recsql.executor.strategies import index

# Both kinds of copy: the Spark loop's partitioned one, and the driver's (default settings).
PATHS = {"spark_loop": {"spark.recsql.endgame.enabled": "false"}, "default": {}}


@pytest.fixture(params=list(PATHS))
def path(request) -> dict:
    return PATHS[request.param]

SSSP = """WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0)
  UNION (SELECT {t}.Dst, path.Cost + {t}.Cost FROM path, {t} WHERE path.Dst = {t}.Src)
SELECT Dst, Cost FROM path"""
EDGES = [(1, 2, 4), (2, 3, 1), (1, 3, 7), (3, 4, 2), (4, 1, 1), (4, 5, 3), (5, 6, 1), (2, 6, 9)]
KEPT = "kept from an earlier statement"


def oracle(edges) -> set[tuple]:
    g = nx.DiGraph()
    for s, d, c in edges:
        if not g.has_edge(s, d) or g[s][d]["weight"] > c:
            g.add_edge(s, d, weight=c)
    return set(nx.single_source_dijkstra_path_length(g, 1).items())


def sssp(spark, table: str, caplog, path: dict, **conf) -> tuple[set[tuple], bool]:
    """The answer on `path`, and whether the statement read a kept copy of `table`."""
    conf = {**path, **conf}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="recsql.executor.state.bases"):
        df = recsql.sql(SSSP.replace("{t}", table), spark=spark, conf=conf)
        answer = {tuple(r) for r in df.collect()}
    return answer, any(KEPT in r.getMessage() and table in r.getMessage() for r in caplog.records)


def test_an_unchanged_file_table_is_copied_once(spark, tmp_path, caplog, path):
    name = unique_name("edges_file")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    assert sssp(spark, name, caplog, path) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, path) == (oracle(EDGES), True)


def test_a_table_whose_files_changed_is_copied_again(spark, caplog, path):
    name = unique_name("edges_table")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.saveAsTable(name)
    try:
        assert sssp(spark, name, caplog, path) == (oracle(EDGES), False)
        spark.sql(f"INSERT INTO {name} VALUES (1, 6, 2), (6, 5, 1)")  # shorter paths to 5 and 6
        changed = [*EDGES, (1, 6, 2), (6, 5, 1)]
        assert oracle(changed) != oracle(EDGES)
        assert sssp(spark, name, caplog, path) == (oracle(changed), False)
        assert sssp(spark, name, caplog, path) == (oracle(changed), True)
    finally:
        spark.sql(f"DROP TABLE {name}")


def test_a_cached_view_is_kept_until_it_is_replaced(spark, caplog, path):
    name = unique_name("edges_cached")
    first = spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").cache()
    first.createOrReplaceTempView(name)
    assert sssp(spark, name, caplog, path) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, path) == (oracle(EDGES), True)
    other = [(s, d, c + 1) for s, d, c in EDGES]
    second = spark.createDataFrame(other, "Src INT, Dst INT, Cost INT").cache()
    second.createOrReplaceTempView(name)
    assert sssp(spark, name, caplog, path) == (oracle(other), False)
    first.unpersist()
    second.unpersist()


@pytest.mark.parametrize("index", ["true", "false"])
def test_a_cached_tables_copy_is_identified_as_the_table(spark, caplog, index):
    # A cold statement's copy of a cached table counts the identity of its own rows in the job
    # that fills it, instead of scanning the table for it first: the next statement, which scans
    # the table, must find the same identity (NULLs, strings, doubles, odd names, a duplicate
    # row), and a table whose rows then differ must not.
    name = unique_name("edges_identified")
    schema = "Src INT, Dst INT, Cost INT, `odd name` STRING, w DOUBLE"
    rows = [(s, d, c, None if s % 2 else f"e{s}{d}", None if d % 3 else s / 3) for s, d, c in EDGES]
    rows.append(rows[0])
    first = spark.createDataFrame(rows, schema).cache()
    first.createOrReplaceTempView(name)
    loop = {**PATHS["spark_loop"], "spark.recsql.index.enabled": index}
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), True)
    # the same plan's cache made again over other rows: only the identity tells
    first.unpersist()
    changed = [(s, d, c + 1, m, w) for s, d, c, m, w in rows]
    second = spark.createDataFrame(changed, schema).cache()
    second.createOrReplaceTempView(name)
    plus_one = [(s, d, c + 1) for s, d, c in EDGES]
    assert sssp(spark, name, caplog, loop) == (oracle(plus_one), False)
    assert sssp(spark, name, caplog, loop) == (oracle(plus_one), True)
    second.unpersist()


def test_a_cached_table_that_cannot_be_hashed_is_run_and_never_kept(spark, caplog):
    # a map column has no hash: the copy's job must not fail for its identity, and the copy is
    # not kept (nothing tells the table's next rows apart)
    name = unique_name("edges_map")
    rows = [(s, d, c, {"k": s}) for s, d, c in EDGES]
    table = spark.createDataFrame(rows, "Src INT, Dst INT, Cost INT, m MAP<STRING, INT>").cache()
    table.createOrReplaceTempView(name)
    loop = PATHS["spark_loop"]
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), False)
    table.unpersist()


# The negative cases run on the default path only: both kinds of copy pass the same check.
def test_a_table_that_can_change_unseen_is_never_kept(spark, caplog):
    # no input files and not cached: its source (JDBC, say) could change behind the same plan
    name = unique_name("edges_mem")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").createOrReplaceTempView(name)
    assert sssp(spark, name, caplog, {}) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, {}) == (oracle(EDGES), False)


def test_a_cached_table_refreshed_by_an_insert_is_copied_again(spark, caplog, path):
    # the cache is re-made under the same plan after the INSERT: only the rows tell the change
    name = unique_name("edges_cached_table")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.saveAsTable(name)
    spark.catalog.cacheTable(name)
    try:
        assert sssp(spark, name, caplog, path) == (oracle(EDGES), False)
        assert sssp(spark, name, caplog, path) == (oracle(EDGES), True)
        spark.sql(f"INSERT INTO {name} VALUES (1, 6, 2), (6, 5, 1)")
        changed = [*EDGES, (1, 6, 2), (6, 5, 1)]
        assert spark.catalog.isCached(name)
        assert sssp(spark, name, caplog, path) == (oracle(changed), False)
        assert sssp(spark, name, caplog, path) == (oracle(changed), True)
    finally:
        spark.catalog.uncacheTable(name)
        spark.sql(f"DROP TABLE {name}")


def test_keeping_can_be_turned_off(spark, tmp_path, caplog):
    name = unique_name("edges_off")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    off = {"spark.recsql.base.keep": "0"}
    assert sssp(spark, name, caplog, {}, **off) == (oracle(EDGES), False)
    assert sssp(spark, name, caplog, {}, **off) == (oracle(EDGES), False)


@pytest.mark.parametrize("endgame", ["true", "false"])
def test_the_users_cached_tables_stay_cached(spark, caplog, endgame):
    # pyspark drops the temporary view it binds a DataFrame through, which uncached any cache
    # entry of the same plan: the user's cached view and cached DataFrame arguments lost theirs
    name = unique_name("edges_users")
    table = spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").cache()
    table.createOrReplaceTempView(name)
    argument = spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").cache()
    conf = {"spark.recsql.endgame.enabled": endgame}
    assert sssp(spark, name, caplog, {}, **conf)[0] == oracle(EDGES)
    by_argument = recsql.sql(SSSP.replace("{t}", "e").replace("FROM path, e", "FROM path, {e} AS e"),
                             spark=spark, conf=conf, e=argument)
    assert {tuple(r) for r in by_argument.collect()} == oracle(EDGES)
    assert spark.catalog.isCached(name)
    assert argument.storageLevel.useMemory
    table.unpersist()
    argument.unpersist()


def _cached_copy(spark, name: str) -> bool:
    """Whether a partitioned copy of `name` (by Src, at any width up to 8: sorted by Src, or its
    adjacency index, index.py) is in the session's cache: a plan of that shape then reads an
    InMemoryRelation (the JVM's plan: a test may)."""
    parts = [spark.table(name).repartition(p, "Src") for p in range(1, 9)]
    copies = [*(part.sortWithinPartitions("Src") for part in parts), *(index.build(part, ("Src",)) for part in parts)]
    plans = (copy._jdf.queryExecution().withCachedData().toString() for copy in copies)
    return any("InMemoryRelation" in plan for plan in plans)


def test_a_copy_not_kept_is_freed_when_the_statement_ends(spark, tmp_path, caplog):
    # A partitioned copy is a cache entry of the session: one that is not kept must not outlive
    # its statement, and a kept one leaves when the table changes.
    name = unique_name("edges_freed")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    loop = PATHS["spark_loop"]
    assert sssp(spark, name, caplog, loop, **{"spark.recsql.base.keep": "0"}) == (oracle(EDGES), False)
    assert not _cached_copy(spark, name)
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), False)
    assert _cached_copy(spark, name)  # kept for the next statement
    changed = [*EDGES, (6, 7, 1)]
    spark.createDataFrame(changed, "Src INT, Dst INT, Cost INT").write.parquet(str(tmp_path / "changed"))
    spark.read.parquet(str(tmp_path / "changed")).createOrReplaceTempView(name)
    assert sssp(spark, name, caplog, loop) == (oracle(changed), False)
    assert _cached_copy(spark, name)
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    assert not _cached_copy(spark, name)  # the old rows' copy left when the new one was made


def test_a_statement_with_keeping_off_leaves_a_kept_copy_cached(spark, tmp_path, caplog):
    # The copy it makes has the kept copy's plan, so Spark caches both in one entry: freeing its
    # own copy at the end freed the kept one too, and later statements repartitioned the whole
    # table at every iteration (still right, only slow)
    name = unique_name("edges_shared")
    spark.createDataFrame(EDGES, "Src INT, Dst INT, Cost INT").write.parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    loop = PATHS["spark_loop"]
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), False)
    assert _cached_copy(spark, name)
    assert sssp(spark, name, caplog, loop, **{"spark.recsql.base.keep": "0"}) == (oracle(EDGES), False)
    assert _cached_copy(spark, name)
    assert sssp(spark, name, caplog, loop) == (oracle(EDGES), True)


def test_what_a_plan_reads_is_told_by_its_leaves(spark, tmp_path):
    # a file scan, rows the plan holds, a cache anywhere, an RDD (which can read anything)
    from recsql.executor.state.bases import CACHE, FILES, OTHER, plan_reads

    path = str(tmp_path / unique_name("leaves"))
    spark.createDataFrame(EDGES, "Src BIGINT, Dst BIGINT, Cost BIGINT").write.parquet(path)
    files = spark.read.parquet(path)
    held = spark.range(3).selectExpr("id AS Src", "id AS Dst", "id AS Cost")
    cached = spark.createDataFrame(EDGES, "Src BIGINT, Dst BIGINT, Cost BIGINT").cache()
    rdd = spark.createDataFrame(EDGES, "Src BIGINT, Dst BIGINT, Cost BIGINT")
    try:
        assert plan_reads(files) == FILES
        assert plan_reads(files.unionAll(held)) == FILES
        assert plan_reads(files.unionAll(cached)) == CACHE
        assert plan_reads(files.unionAll(rdd)) == OTHER
    finally:
        cached.unpersist()


def test_plans_explained_side_by_side_leave_stdout_as_it_was(spark, tmp_path):
    # the plan is read from what `explain()` prints: statements side by side (the server) must
    # not leave `sys.stdout` swapped for one another's buffer
    import sys
    import threading

    from recsql.executor.state.bases import FILES, plan_reads

    path = str(tmp_path / unique_name("side_by_side"))
    spark.createDataFrame(EDGES, "Src BIGINT, Dst BIGINT, Cost BIGINT").write.parquet(path)
    df = spark.read.parquet(path)
    stdout, found = sys.stdout, []
    threads = [threading.Thread(target=lambda: found.extend(plan_reads(df) for _ in range(5)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sys.stdout is stdout and found == [FILES] * 20
