"""The `recsql serve` command: options checked before Spark starts; end to end in a process of
its own (its own Spark: slow), stopped by SIGTERM with exit code 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from recsql.cli.serve import serve
from tests.server.clients import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("args, message", [
    (["--add-user", "analyst"], "--add-user needs --password-file"),
    (["--auth", "password"], "needs a password file"),
    (["--ssl-cert", __file__], "both a certificate and its key"),
    (["--host", "0.0.0.0"], "refusing to serve 0.0.0.0 without authentication"),
])
def test_bad_options_are_usage_errors(args, message):
    result = CliRunner().invoke(serve, args)
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.slow
def test_serve_command_end_to_end():
    from pyhive import hive

    roads = os.path.join(REPO, "examples", "data", "roads.csv")
    process = subprocess.Popen(
        [sys.executable, "-c", "from recsql.cli import main; main()", "serve", "--port", "0",
         "--master", "local[1]", "--table", f"edge={roads}"],
        stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        port = None
        deadline = time.monotonic() + 180
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line, "recsql serve exited before listening"
            if match := re.search(r"listening on 127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
        connection = hive.Connection(host="127.0.0.1", port=port, auth="NOSASL")
        try:
            cursor = connection.cursor()
            cursor.execute("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION "
                           "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge "
                           "WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path WHERE Dst = 1")
            assert cursor.fetchall() == [(1, 0)]
        finally:
            connection.close()
        process.send_signal(signal.SIGTERM)
        assert wait_for(lambda: process.poll() is not None, 60) and process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
