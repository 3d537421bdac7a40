"""Table references in every form Spark takes them, in every part of a recursive statement.

Each form reads one of several tables holding different graphs, so a name resolved to the wrong
one gives other rows. The oracle is Spark's own resolution: the rows `spark.sql` reads through
the very name as written (non-recursive), put through a plain-Python fixpoint."""

from __future__ import annotations

import random

import oracles
import pytest
from conftest import rows
from pyspark.errors import AnalysisException

import recsql
from recsql import RecSQLAnalysisError
from recsql.executor.loop.spark_sql import quiet_pyspark_error_logs
from tests.api.test_errors import assert_points_at

DB = "names_db"
SCHEMA = "src INT, dst INT, cost INT"

# An SSSP that reads the table `{T}` (aliased `e`) in its anchor, its recursive branch, the
# final query's join and a correlated scalar subquery.
QUERY = """WITH recursive path (Dst, min() AS Cost) AS
    (SELECT DISTINCT e.src, 0 FROM {T} WHERE e.src = 1)
  UNION
    (SELECT e.dst, path.Cost + e.cost FROM path, {T} WHERE path.Dst = e.src)
SELECT path.Dst, path.Cost, e.cost AS back,
       (SELECT count(*) FROM {T} WHERE e.src = path.Dst) AS outdeg
FROM path LEFT JOIN {T} ON e.src = path.Dst AND e.dst = 1"""


def graph(seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    return sorted({(s, d, rng.randint(1, 9)) for s in range(1, 13) for d in rng.sample(range(1, 13), 2) if s != d}
                  | {(1, 2, seed)})  # node 1 always has an edge; its cost tells the graphs apart


def oracle(edges) -> list[tuple]:
    cost = {(s, d): c for s, d, c in edges}
    dist = oracles.dijkstra(edges, 1)
    return sorted((d, c, cost.get((d, 1)), sum(1 for s, _, _ in edges if s == d)) for d, c in dist.items())


@pytest.fixture(scope="module")
def catalog(spark):
    """Tables and views that share names: `names_db.links` (a table), `default.links` (a table
    shadowed by the temp view `links`), the temp view `` `names_db.links` `` (one part), and
    `roads` in both schemas, with no temp view."""
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {DB}")
    made = {}
    for seed, (kind, name) in enumerate([("table", f"{DB}.links"), ("table", "default.links"),
                                         ("view", "links"), ("view", f"`{DB}.links`"),
                                         ("table", f"{DB}.roads"), ("table", "default.roads")], start=1):
        df = spark.createDataFrame(graph(seed), SCHEMA)
        if kind == "table":
            df.write.format("parquet").mode("overwrite").saveAsTable(name)
        else:
            df.createOrReplaceTempView(name)  # parsed as a name: `a.b` is one part
        made[name] = seed
    yield made
    spark.catalog.setCurrentDatabase("default")
    for view in ("links", f"{DB}.links"):
        spark.catalog.dropTempView(view)
    spark.sql(f"DROP SCHEMA {DB} CASCADE")
    spark.sql("DROP TABLE IF EXISTS default.links")
    spark.sql("DROP TABLE IF EXISTS default.roads")


@pytest.fixture
def use(spark):
    """`use(db)`: the session's current schema for the test (`USE db`)."""
    def switch(db: str) -> None:
        spark.sql(f"USE {db}")
    yield switch
    spark.sql("USE default")


# (reference as written, alias form appended, schema in use, the table it must read)
FORMS = {
    "db.t": (f"{DB}.links e", "default", f"{DB}.links"),
    "db.t AS": (f"{DB}.links AS e", "default", f"{DB}.links"),
    "catalog.db.t": (f"spark_catalog.{DB}.links e", "default", f"{DB}.links"),
    "quoted parts": (f"`{DB}`.`links` AS e", "default", f"{DB}.links"),
    "other case": (f"{DB.upper()}.Links e", "default", f"{DB}.links"),
    "one quoted part": (f"`{DB}.links` e", "default", f"`{DB}.links`"),
    "temp view shadows": ("links e", "default", "links"),
    "shadowed table": ("default.links AS e", "default", "default.links"),
    "catalog.default.t": ("spark_catalog.default.links e", "default", "default.links"),
    "USE db": ("roads e", DB, f"{DB}.roads"),
    "USE db, other db": ("default.roads e", DB, "default.roads"),
}


def spark_reads(spark, reference: str) -> list[tuple]:
    """The rows Spark itself reads through `reference` (non-recursive SQL)."""
    return rows(spark.sql(f"SELECT e.src, e.dst, e.cost FROM {reference}"))


@pytest.mark.parametrize("form", FORMS)
def test_every_form_in_every_place(spark, catalog, use, form):
    reference, db, table = FORMS[form]
    use(db)
    edges = spark_reads(spark, reference)
    assert edges == graph(catalog[table])  # Spark resolves it to the table the form names
    assert rows(recsql.sql(QUERY.replace("{T}", reference), spark=spark)) == oracle(edges)


@pytest.mark.parametrize("loop", [False, True], ids=["default", "spark loop"])
def test_kept_copies_never_confuse_tables_of_one_name(spark, catalog, use, loop, request):
    """The same statement text under two schemas, then `db.t`, the one-part `` `db.t` `` and
    `db.t` again in quoted parts: each reads its own table, never a copy kept (partitioned or
    pulled) for the other. On the Spark loop (every iteration on Spark, the recursive branch's
    table pre-partitioned and kept) these are the forms `USE db`, `db.t`, `one quoted part` and
    `quoted parts` of `FORMS`."""
    if loop:
        request.getfixturevalue("spark_loop")
    for db, reference in [(DB, "roads e"), ("default", "roads e"), (DB, "roads e"),
                          ("default", f"{DB}.links e"), ("default", f"`{DB}.links` e"),
                          ("default", f"`{DB}`.`links` AS e")]:
        use(db)
        edges = spark_reads(spark, reference)
        assert rows(recsql.sql(QUERY.replace("{T}", reference), spark=spark)) == oracle(edges), (db, reference)


def test_qualified_targets(spark, catalog):
    source = QUERY.replace("{T}", f"{DB}.links e")
    expected = oracle(spark_reads(spark, f"{DB}.links e"))
    target = f"{DB}.sssp_out"
    spark.sql(f"DROP TABLE IF EXISTS {target}")
    recsql.script(f"CREATE TABLE {DB}.sssp_out USING parquet AS {source}", spark=spark)
    assert rows(spark.table(target)) == expected
    recsql.script(f"INSERT INTO `{DB}`.`sssp_out` {source}", spark=spark)
    assert rows(spark.table(target)) == sorted(expected * 2)
    recsql.script(f"INSERT OVERWRITE spark_catalog.{DB}.sssp_out {source}", spark=spark)
    assert rows(spark.table(target)) == expected
    recsql.script(f"INSERT INTO TABLE {DB}.sssp_out (Dst, Cost, back, outdeg) {source}", spark=spark)
    assert rows(spark.table(target)) == sorted(expected * 2)
    recsql.script(f"CREATE OR REPLACE TEMP VIEW sssp_view AS {source}", spark=spark)
    assert rows(recsql.sql("SELECT * FROM sssp_view", spark=spark)) == expected  # a stored definition
    spark.catalog.dropTempView("sssp_view")


def test_qualified_target_refusals_point_at_the_name(spark, catalog):
    """What Spark refuses of a target is its error at the target's name, never a raw one."""
    source = QUERY.replace("{T}", f"{DB}.links e")
    cases = {f"INSERT INTO {DB}.no_such {source}": ("TABLE_OR_VIEW_NOT_FOUND", f"{DB}.no_such"),
             f"CREATE TABLE nodb.t USING parquet AS {source}": ("SCHEMA_NOT_FOUND", "nodb.t"),
             f"CREATE TABLE {DB}.links USING parquet AS {source}": ("TABLE_OR_VIEW_ALREADY_EXISTS", f"{DB}.links")}
    for statement, (condition, name) in cases.items():
        with pytest.raises(RecSQLAnalysisError) as info:
            recsql.script(statement, spark=spark)
        assert info.value.condition == condition, str(info.value)
        assert_points_at(info.value, statement, name)
        assert info.value.length == len(name)


PLACES = {
    "anchor": ("FROM {T} WHERE e.src = 1", "FROM {M} WHERE e.src = 1"),
    "recursive branch": ("FROM path, {T} WHERE", "FROM path, {M} WHERE"),
    "final query": ("FROM path LEFT JOIN {T}", "FROM path LEFT JOIN {M}"),
    "subquery": ("SELECT count(*) FROM {T}", "SELECT count(*) FROM {M}"),
}


@pytest.mark.parametrize("missing", [f"{DB}.linkz", f"`{DB}`.`linkz`", "nodb.links", f"`{DB}.roads`"])
@pytest.mark.parametrize("place", PLACES)
def test_missing_table_is_sparks_error_named_as_written(spark, catalog, place, missing):
    before, after = PLACES[place]
    q = QUERY.replace(before, after).replace("{M}", f"{missing} e").replace("{T}", f"{DB}.links e")
    with pytest.raises(RecSQLAnalysisError) as info:
        recsql.sql(q, spark=spark).collect()
    err = info.value
    # Spark's own error for the same name (its error logger fails under pytest's logging)
    with pytest.raises(AnalysisException) as spark_error, quiet_pyspark_error_logs():
        spark.sql(f"SELECT * FROM {missing}").collect()
    assert err.condition == spark_error.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    assert spark_error.value.getMessageParameters()["relationName"] in err.message
    assert err.sqlstate == "42P01"
    assert_points_at(err, q, missing)
    assert err.length == len(missing)


def test_checkpoint_fingerprints_tell_tables_of_one_name_apart(spark, catalog, use):
    """A checkpoint of `roads` under `USE names_db` is never resumed for `roads` under another
    schema, nor one of `names_db.links` for the one-part `` `names_db.links` ``."""
    from recsql.executor.strategies.recovery import fingerprint, read_relations
    from recsql.parser import parse_statement
    from recsql.planner import plan_query
    from recsql.settings import Settings
    from recsql.statements.catalog import SparkCatalog

    def fingerprint_of(reference: str) -> tuple[str, set]:
        text = QUERY.replace("{T}", reference)
        plan = plan_query(parse_statement(text).expression, text, SparkCatalog(spark))
        return fingerprint(spark, plan, Settings.read(spark), None, {}), read_relations(plan)

    use(DB)
    here, names = fingerprint_of("roads e")
    use("default")
    there, _ = fingerprint_of("roads e")
    assert here != there and [n.parts for n in names] == [("roads",)]
    qualified, two_parts = fingerprint_of(f"{DB}.links e")
    quoted, one_part = fingerprint_of(f"`{DB}.links` e")
    assert {n.parts for n in two_parts} == {(DB, "links")} and {n.parts for n in one_part} == {(f"{DB}.links",)}
