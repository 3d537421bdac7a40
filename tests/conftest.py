"""Shared fixtures: one local[2] SparkSession for the whole suite, and small helpers.

Oracles live in the tests themselves (networkx, scipy, plain-Python fixpoints, hand tables);
recsql is never its own oracle.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
DATA = REPO / "tests" / "data"  # small real graphs and RaDlog's corpus, shipped with the tests

_view_counter = itertools.count()

# The suite's JVMs live a few minutes and run thousands of small queries, so C2's compilations
# cost more CPU than they earn back: with C1 alone a test file took 22-25% less CPU (driver and
# JVM). Only the JIT's effort changes, never a query's plan or answer.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


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
        .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
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


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """A Spark Connect server on 127.0.0.1 started from the installed pyspark's own scripts, for
    one test module (tests/api/test_connect.py, the notebook on Connect; stopped after it, so
    that its JVM does not stay through the suite): its `sc://` URL."""
    port = free_port()
    logs = tmp_path_factory.mktemp("connect")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(logs),
           "SPARK_PID_DIR": str(logs), "SPARK_IDENT_STRING": f"recsql{port}"}
    start = [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false",
             "--conf", f"spark.driver.extraJavaOptions={TEST_JVM_OPTIONS}",
             "--conf", f"spark.sql.warehouse.dir={logs / 'warehouse'}"]  # tables made here
    subprocess.run(start, env=env, check=True, capture_output=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(1)
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(SPARK_HOME / "sbin" / "stop-connect-server.sh")], env=env,
                       capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def spark_loop(spark):
    """Every iteration on Spark (the driver endgame off) for the duration of a test: for tests
    of the Spark loop's own machinery (roll-over, recovery, skew, the join-side vote, doubling,
    the key lookup)."""
    with setting(spark, "spark.recsql.endgame.enabled", "false"):
        yield


@contextlib.contextmanager
def setting(spark, key: str, value: str):
    """`key` set to `value` in the session for the block, then as it was before."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
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
