"""The real clients' suite (`pytest -m clients`): dbt and Superset, each in its own virtualenv
(tests/clients/venvs.py), against `recsql serve` started as users start it: a process of its
own, with its own Spark, in a working directory of its own (where a metastore would live)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clients.process import terminate
from tests.conftest import REPO


class RecSQLServer:
    """`recsql serve --port 0` in `home`; its log is `home/serve.log`. (With a Hive metastore it
    starts in minutes on a loaded machine.)"""

    def __init__(self, home: Path):
        self.home = home
        self.log = home / "serve.log"
        self.process: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> RecSQLServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from recsql.cli import main; main()", "serve", "--port", "0",
                 "--master", "local[2]", "-c", f"spark.sql.warehouse.dir={self.home / 'warehouse'}",
                 "-c", "spark.sql.shuffle.partitions=2", "-c", "spark.ui.enabled=false",
                 "-c", "spark.driver.memory=2g"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.home, env=env)
        try:
            self.port = self.wait_for_port(deadline=time.monotonic() + 600)
        except BaseException:  # interrupted too: never leave a server behind
            self.stop()
            raise
        return self

    def wait_for_port(self, deadline: float) -> int:
        while time.monotonic() < deadline:
            if match := re.findall(r"listening on 127\.0\.0\.1:(\d+)", self.log.read_text()):
                return int(match[-1])
            if self.process.poll() is not None:
                raise AssertionError(f"recsql serve exited:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)
        raise AssertionError(f"recsql serve did not listen within 600 s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        terminate(self.process)

    def cursor(self, database: str = "default"):
        from pyhive import hive

        connection = hive.Connection(host="127.0.0.1", port=self.port, username="analyst",
                                     database=database, auth="NOSASL")
        return connection, connection.cursor()

    def query(self, sql: str, database: str = "default") -> list[tuple]:
        """`sql`'s rows, read on a new connection."""
        connection, cursor = self.cursor(database)
        try:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            connection.close()


@pytest.fixture(scope="module")
def recsql_server(tmp_path_factory):
    server = RecSQLServer(tmp_path_factory.mktemp("recsql-serve")).start()
    yield server
    server.stop()
