"""Shared fixtures: one local[2] SparkSession for the whole suite, and small helpers.

Oracles live in the tests themselves (networkx, scipy, plain-Python fixpoints, hand tables);
recsql is never its own oracle.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
DATA = REPO / "tests" / "data"  # small real graphs and RaDlog's corpus, shipped with the tests

_view_counter = itertools.count()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")  # CREATE TABLE writes here, not into the repo
    session = (
        SparkSession.builder.master("local[2]")
        .appName("recsql-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        # recsql's own settings stay at their defaults: the suite tests what users get (the
        # driver endgame finishes most of these small fixpoints); tests that exist to exercise
        # the Spark loop ask for it with the `spark_loop` fixture
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_loop(spark):
    """Every iteration on Spark (the driver endgame off) for the duration of a test: for tests
    of the Spark loop's own machinery (roll-over, recovery, skew, the join-side vote, doubling,
    the key lookup)."""
    key = "spark.recsql.endgame.enabled"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    yield
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def register(spark, name: str, data, schema: str):
    """Register a list of tuples as temp view `name` (schema as a DDL string); returns the df."""
    df = spark.createDataFrame(list(data), schema)
    df.createOrReplaceTempView(name)
    return df


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}_{next(_view_counter)}"


def rows(df) -> list[tuple]:
    """The rows of a DataFrame as a sorted list of plain tuples."""
    return sorted((tuple(r) for r in df.collect()), key=_sort_key)


def _sort_key(row):
    return tuple((v is None, repr(type(v)) if v is None else "", v if v is not None else 0) for v in row)


def approx_rows(actual, expected, rel=1e-6, abs_=1e-9):
    """Compare two row lists whose last columns may be floats."""
    assert len(actual) == len(expected), (actual, expected)
    for a, e in zip(actual, expected):
        assert len(a) == len(e)
        for x, y in zip(a, e):
            if isinstance(x, float) or isinstance(y, float):
                assert x == pytest.approx(y, rel=rel, abs=abs_), (a, e)
            else:
                assert x == y, (a, e)


@pytest.fixture
def view(spark):
    """`view(name, rows, schema)` registers a temp view and drops it after the test."""
    created = []

    def make(name, data, schema):
        created.append(name)
        return register(spark, name, data, schema)

    yield make
    for name in created:
        spark.catalog.dropTempView(name)
