"""The driver copies of base tables kept across statements as native tables of the session's DuckDB
database (`recsql.executor.endgame.database`): one node's ancestors through a transitive-closure
view, run wholly on the driver (the demand rewrite evaluates it backwards from the node). A
changed table gives the new answer; statements run
side by side and sessions do not share states; every answer is checked against networkx."""

from __future__ import annotations

import logging
import random
import threading

import networkx as nx
import pytest
from conftest import unique_name

import recsql
from recsql.executor.endgame import database

VIEW = ("CREATE OR REPLACE TEMPORARY VIEW {view} AS WITH recursive tc (X, Y) AS "
        "(SELECT Src, Dst FROM {t}) UNION (SELECT tc.X, {t}.Dst FROM tc, {t} WHERE tc.Y = {t}.Src) "
        "SELECT X AS node, Y AS reached FROM tc")
ASK = "SELECT node FROM {view} WHERE reached = {v}"
KEPT = "kept from an earlier statement"


def edges(seed: int, n: int = 40, m: int = 90) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randrange(n), rng.randrange(n)) for _ in range(m)]


def ancestors(graph: list[tuple[int, int]], v: int) -> set[int]:
    """networkx: the nodes with a path of at least one edge to `v` (`v` itself on a cycle)."""
    g = nx.DiGraph(graph)
    if v not in g:
        return set()
    on_cycle = any(u == v or nx.has_path(g, u, v) for u in g.successors(v))
    return set(nx.ancestors(g, v)) | ({v} if on_cycle else set())


def ask(spark, view: str, v: int, caplog) -> tuple[set[int], bool]:
    """The answer, and whether the statement read a kept driver copy."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="recsql.executor.state.bases"):
        answer = {r[0] for r in recsql.sql(ASK.format(view=view, v=v), spark=spark).collect()}
    return answer, any(KEPT in r.getMessage() and "pulled" in r.getMessage() for r in caplog.records)


def base_tables(spark) -> set[str]:
    """The tables in the main schema of the session's database (only base copies belong there:
    every statement's states are temporary tables of its own cursor)."""
    return {r[0] for r in database.of(spark).cursor().execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()}


def closure_view(spark, table: str) -> str:
    view = unique_name("closure")
    recsql.sql(VIEW.format(view=view, t=table), spark=spark)
    return view


def a_target(graph: list[tuple[int, int]]) -> int:
    """A node with several ancestors, so the answer says something."""
    return max({d for _, d in graph}, key=lambda v: (len(ancestors(graph, v)), v))


def test_the_oracle_counts_a_node_on_a_cycle_as_its_own_ancestor():
    assert ancestors([(1, 2), (2, 1), (3, 1)], 1) == {1, 2, 3}
    assert ancestors([(1, 2), (3, 1)], 1) == {3}


def test_a_rewritten_parquet_table_gives_the_new_answer(spark, tmp_path, caplog):
    name = unique_name("edges_pq")
    first, second = edges(1), edges(2)
    spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").write.parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    view, v = closure_view(spark, name), a_target(first)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), False)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), True)
    copies = base_tables(spark)
    spark.createDataFrame(second, "Src BIGINT, Dst BIGINT").write.mode("overwrite").parquet(str(tmp_path / name))
    spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(name)
    assert ancestors(second, v) != ancestors(first, v)
    assert ask(spark, view, v, caplog) == (ancestors(second, v), False)
    assert ask(spark, view, v, caplog) == (ancestors(second, v), True)
    # the replaced copy was dropped from the database, its successor made
    assert len(base_tables(spark) - copies) == 1 and len(copies - base_tables(spark)) == 1


def test_a_cached_table_after_an_insert_gives_the_new_answer(spark, caplog):
    name = unique_name("edges_cached")
    graph = edges(3)
    spark.createDataFrame(graph, "Src BIGINT, Dst BIGINT").write.saveAsTable(name)
    spark.catalog.cacheTable(name)
    try:
        view, v = closure_view(spark, name), a_target(graph)
        assert ask(spark, view, v, caplog) == (ancestors(graph, v), False)
        assert ask(spark, view, v, caplog) == (ancestors(graph, v), True)
        added = [(100, 101), (101, next(iter(ancestors(graph, v))))]
        spark.sql(f"INSERT INTO {name} VALUES " + ", ".join(f"({s}, {d})" for s, d in added))
        changed = [*graph, *added]
        assert spark.catalog.isCached(name) and ancestors(changed, v) != ancestors(graph, v)
        assert ask(spark, view, v, caplog) == (ancestors(changed, v), False)
        assert ask(spark, view, v, caplog) == (ancestors(changed, v), True)
    finally:
        spark.catalog.uncacheTable(name)
        spark.sql(f"DROP TABLE {name}")


@pytest.mark.parametrize("cached", [False, True], ids=["files", "cached"])
def test_a_file_appended_to_the_path_gives_the_new_answer(spark, tmp_path, caplog, cached):
    # The view is read again from the same path once a file is added: the same plan to Spark
    # (its file index is equal by its root path), other rows. Uncached, its files tell the
    # change; cached, a cache made again from the grown path under that same plan lists no
    # files, and only its rows tell the change.
    name = unique_name("edges_grown")
    path = str(tmp_path / name)
    first = edges(6)
    spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").write.parquet(path)

    def register():
        df = spark.read.parquet(path)
        if cached:
            df.cache().count()
        df.createOrReplaceTempView(name)
        return df

    old = register()
    view, v = closure_view(spark, name), a_target(first)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), False)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), True)
    added = [(200, 201), (201, next(iter(ancestors(first, v))))]
    spark.createDataFrame(added, "Src BIGINT, Dst BIGINT").write.mode("append").parquet(path)
    old.unpersist()
    new = register()
    assert new.sameSemantics(old)
    grown = [*first, *added]
    assert ancestors(grown, v) != ancestors(first, v)
    assert ask(spark, view, v, caplog) == (ancestors(grown, v), False)
    assert ask(spark, view, v, caplog) == (ancestors(grown, v), True)
    new.unpersist()


def test_a_replaced_temp_view_gives_the_new_answer(spark, caplog):
    name = unique_name("edges_view")
    first, second = edges(4), edges(5)
    one = spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").cache()
    one.createOrReplaceTempView(name)
    view, v = closure_view(spark, name), a_target(first)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), False)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), True)
    two = spark.createDataFrame(second, "Src BIGINT, Dst BIGINT").cache()
    two.createOrReplaceTempView(name)
    assert ancestors(second, v) != ancestors(first, v)
    assert ask(spark, view, v, caplog) == (ancestors(second, v), False)
    one.unpersist()
    two.unpersist()


def test_statements_side_by_side_do_not_share_states(spark, caplog):
    # the same view and the same kept copy, different targets, four threads at once: every
    # statement's states (the same table names in each) are its own cursor's
    name = unique_name("edges_threads")
    graph = edges(6, n=60, m=150)
    spark.createDataFrame(graph, "Src BIGINT, Dst BIGINT").cache().createOrReplaceTempView(name)
    view = closure_view(spark, name)
    targets = sorted({d for _, d in graph})[:8]
    ask(spark, view, targets[0], caplog)  # the copy is made and kept
    answers: dict[int, list[set[int]]] = {v: [] for v in targets}
    failures: list[BaseException] = []

    def work(vs: list[int]) -> None:
        try:
            for v in vs * 2:
                answers[v].append({r[0] for r in recsql.sql(ASK.format(view=view, v=v), spark=spark).collect()})
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=work, args=(targets[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert answers == {v: [ancestors(graph, v)] * 2 for v in targets}
    assert all(t.startswith("rq_base_") for t in base_tables(spark))  # no state left in `main`


def test_two_sessions_with_one_view_name_over_other_rows_get_their_own_answers(spark, caplog):
    # the same temp view name holds other rows in each session: the sessions share the kept
    # copies (bases.owner), and each gets its own answer, the copy of one never read by the other
    other = spark.newSession()
    name = unique_name("edges_session")
    first, second = edges(7), edges(8)
    spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").cache().createOrReplaceTempView(name)
    other.createDataFrame(second, "Src BIGINT, Dst BIGINT").cache().createOrReplaceTempView(name)
    view = unique_name("closure")
    for session in (spark, other):
        recsql.sql(VIEW.format(view=view, t=name), spark=session)
    v = a_target(first)
    assert ancestors(first, v) != ancestors(second, v)
    for _ in range(2):
        assert ask(spark, view, v, caplog)[0] == ancestors(first, v)
        assert ask(other, view, v, caplog)[0] == ancestors(second, v)
    assert database.of(spark) is database.of(other)


def test_a_new_session_reads_the_copy_another_session_kept(spark, tmp_path, caplog):
    # a server's connection per query is a session per query: its first statement over an
    # unchanged table finds the copy an earlier session kept; a rewrite is seen by both
    name = unique_name("edges_shared")
    path = str(tmp_path / name)
    first, second = edges(30), edges(31)
    spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView(name)
    view = closure_view(spark, name)
    v = a_target(first)
    assert ask(spark, view, v, caplog) == (ancestors(first, v), False)
    fresh = spark.newSession()
    fresh.read.parquet(path).createOrReplaceTempView(name)
    recsql.sql(VIEW.format(view=view, t=name), spark=fresh)
    assert ask(fresh, view, v, caplog) == (ancestors(first, v), True)
    spark.createDataFrame(second, "Src BIGINT, Dst BIGINT").write.mode("overwrite").parquet(path)
    for session in (fresh, spark.newSession()):
        session.read.parquet(path).createOrReplaceTempView(name)
        recsql.sql(VIEW.format(view=view, t=name), spark=session)
        assert ask(session, view, v, caplog)[0] == ancestors(second, v)


@pytest.mark.parametrize("keep", ["0", "1"])
def test_copies_leave_the_database_with_keeping_off_or_past_the_limit(spark, caplog, keep):
    names = [unique_name("edges_lru") for _ in range(3)]
    for i, name in enumerate(names):
        spark.createDataFrame(edges(10 + i), "Src BIGINT, Dst BIGINT").cache().createOrReplaceTempView(name)
    before = base_tables(spark)
    for i, name in enumerate(names):
        graph, view = edges(10 + i), closure_view(spark, name)
        v = a_target(graph)
        conf = {"spark.recsql.base.keep": keep}
        answer = {r[0] for r in recsql.sql(ASK.format(view=view, v=v), spark=spark, conf=conf).collect()}
        assert answer == ancestors(graph, v)
    # at most `keep` of the three new copies remain (the session's LRU: the others are dropped)
    assert len(base_tables(spark) - before) <= int(keep)


def test_a_view_mixing_a_cached_table_with_files_gives_the_new_answer(spark, tmp_path, caplog):
    # The view's plan reads parquet files and a cached table: its input files are the parquet
    # files alone (the cached part is read from its cache), so they cannot tell an INSERT into
    # the cached table; its rows must.
    cached, name = unique_name("edges_mixed_cached"), unique_name("edges_mixed")
    first, second = edges(20), edges(21)
    spark.createDataFrame(first, "Src BIGINT, Dst BIGINT").write.saveAsTable(cached)
    spark.catalog.cacheTable(cached)
    path = str(tmp_path / name)
    spark.createDataFrame(second, "Src BIGINT, Dst BIGINT").write.parquet(path)
    try:
        spark.read.parquet(path).unionAll(spark.table(cached)).createOrReplaceTempView(name)
        graph = [*first, *second]
        view, v = closure_view(spark, name), a_target(graph)
        assert ask(spark, view, v, caplog) == (ancestors(graph, v), False)
        assert ask(spark, view, v, caplog) == (ancestors(graph, v), True)
        added = [(300, 301), (301, next(iter(ancestors(graph, v))))]
        spark.sql(f"INSERT INTO {cached} VALUES " + ", ".join(f"({s}, {d})" for s, d in added))
        changed = [*graph, *added]
        assert spark.catalog.isCached(cached) and ancestors(changed, v) != ancestors(graph, v)
        assert ask(spark, view, v, caplog) == (ancestors(changed, v), False)
        assert ask(spark, view, v, caplog) == (ancestors(changed, v), True)
    finally:
        spark.catalog.uncacheTable(cached)
        spark.sql(f"DROP TABLE {cached}")


def test_a_grown_copy_unions_its_parts_until_it_is_made_one_table_again():
    """`Database.grown`: a copy grown by new rows is a view of its parts (no row copied), with
    every row of the copy it grew from and the new ones, the parts' tables dropped with the last
    copy holding them; past `MAX_PARTS` parts one table again; rows of other column types are
    not added (None). Checked against the rows put in, kept in a plain list."""
    import gc

    from sqlglot import exp

    db = database.Database()
    cursor = db.cursor()

    def values(rows: list[tuple[int, int]]) -> exp.Query:
        body = ", ".join(f"({a}::BIGINT, {b}::BIGINT)" for a, b in rows)
        return exp.maybe_parse(f"SELECT * FROM (VALUES {body}) AS v(Src, Dst)", dialect="duckdb")

    def names(kind: str) -> set[str]:
        return {r[0] for r in cursor.execute(f"SELECT {kind}_name FROM duckdb_{kind}s() "
                                             "WHERE schema_name = 'main' AND NOT temporary").fetchall()}

    expected = [(1, 2), (2, 3)]
    copy = db.copy_of(cursor, values(expected), 16)
    first = copy.name
    for i in range(database.MAX_PARTS):
        more = [(10 + i, 20 + i), (1, 2)]  # a row already there stays a second row (a bag)
        grown = db.grown(cursor, copy, values(more), 16)
        assert grown is not None
        copy, expected = grown, expected + more
        got = cursor.execute(exp.select("*").from_(copy.table()).sql("duckdb", identify=True)).fetchall()
        assert sorted(got) == sorted(expected) and copy.num_rows == len(expected)
        assert len(copy.pieces()) == (i + 2 if i + 2 <= database.MAX_PARTS else 1)
    assert copy.name in names("table") and first not in names("table")  # made one table again
    wide = exp.maybe_parse("SELECT 1::INTEGER AS Src, 2::BIGINT AS Dst", dialect="duckdb")
    assert db.grown(cursor, copy, wide, 16) is None
    grown = db.grown(cursor, copy, values([(5, 6)]), 16)
    assert grown is not None and grown.name in names("view")
    pieces = {p.name for p in grown.pieces()}
    del grown, copy
    gc.collect()
    assert not ({*pieces} & names("table")) and not names("view")
