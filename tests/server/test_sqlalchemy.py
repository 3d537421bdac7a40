"""recsql's SQLAlchemy dialect (`recsql://`) against the server: table lists read from Spark's
`SHOW TABLES` columns (PyHive's Hive dialect lists the database's name instead), views apart,
columns, a missing table, a recursive query. The oracle is what the test created."""

from __future__ import annotations

import sys

import pytest

from tests.server.clients import SSSP, sssp_oracle

PYPROJECT = "pyproject.toml"


@pytest.fixture(scope="module")
def database(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS alchemy")
    spark.sql("CREATE TABLE IF NOT EXISTS alchemy.points USING parquet AS "
              "SELECT CAST(id AS INT) AS x, CAST(id AS STRING) AS label FROM range(3)")
    spark.sql("CREATE OR REPLACE VIEW alchemy.even_points AS SELECT x FROM alchemy.points WHERE x % 2 = 0")
    yield "alchemy"
    spark.sql("DROP DATABASE IF EXISTS alchemy CASCADE")


def entry_points() -> dict[str, str]:
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")
    from tests.conftest import REPO

    with open(REPO / PYPROJECT, "rb") as stream:
        return tomllib.load(stream)["project"]["entry-points"]["sqlalchemy.dialects"]


def test_entry_points_name_the_dialect():
    from recsql.sqlalchemy import RecSQLDialect

    declared = entry_points()
    assert set(declared) == {"recsql", "hive.recsql"}
    for target in declared.values():
        module, _, name = target.partition(":")
        assert getattr(__import__(module, fromlist=[name]), name) is RecSQLDialect


@pytest.fixture
def engine(server, database):
    from sqlalchemy import create_engine
    from sqlalchemy.dialects import registry

    # the entry point as pyproject.toml declares it (the installed metadata may be another checkout's)
    module, _, name = entry_points()["recsql"].partition(":")
    registry.register("recsql", module, name)
    engine = create_engine(f"recsql://analyst@127.0.0.1:{server.port}/{database}")  # SASL PLAIN
    yield engine
    engine.dispose()


def test_inspector_lists_tables_views_and_columns(engine, database):
    from sqlalchemy import inspect

    inspector = inspect(engine)
    assert {"default", database} <= set(inspector.get_schema_names())
    assert inspector.get_table_names(schema=database) == ["points"]
    assert inspector.get_view_names(schema=database) == ["even_points"]
    assert inspector.get_temp_view_names() == ["edge"]  # the server's shared view, in every session
    columns = inspector.get_columns("points", schema=database)
    assert [(c["name"], type(c["type"]).__name__) for c in columns] == [("x", "Integer"), ("label", "String")]
    assert inspector.has_table("points", schema=database)
    assert not inspector.has_table("no_such_table", schema=database)


def test_recursive_query_through_the_engine(engine):
    from sqlalchemy import text

    with engine.connect() as connection:
        assert sorted(tuple(r) for r in connection.execute(text(SSSP))) == sssp_oracle()
