"""Asynchronous execution, the operation log, cancellation mid-fixpoint and errors, through
PyHive (a maintained HiveServer2 client) on 127.0.0.1."""

from __future__ import annotations

import time

import pytest
from pyhive.exc import OperationalError
from TCLIService.ttypes import TOperationState

from tests.server.clients import SSSP, connect, cursor, sssp_oracle, wait_for

CHAIN = 2000
REACH = """WITH recursive reach (Node) AS (SELECT 0)
  UNION (SELECT chain.Dst FROM reach, chain WHERE reach.Node = chain.Src)
SELECT count(*) FROM reach"""


def test_async_execution_with_polling_and_the_operation_log(server):
    with cursor(server) as cur:
        cur.execute(SSSP, async_=True)
        done = (TOperationState.FINISHED_STATE, TOperationState.ERROR_STATE)
        poll = wait_for(lambda: (p := cur.poll()).operationState in done and p, 120)
        assert poll.operationState == TOperationState.FINISHED_STATE
        logs = cur.fetch_logs()
        iterations = [line for line in logs if line.startswith("path: iteration ")]
        assert iterations and "delta rows" in iterations[0] and " s, on " in iterations[0], logs
        assert sorted(cur.fetchall()) == sssp_oracle()
        assert cur.fetch_logs() == []  # the log is read once, incrementally


def test_cancel_mid_fixpoint_then_the_next_query_works(server, spark):
    connection = connect(server, configuration={"spark.recsql.endgame.enabled": "false"})
    try:
        cur = connection.cursor()
        cur.execute(f"CREATE TEMPORARY VIEW chain AS SELECT id AS Src, id + 1 AS Dst FROM range({CHAIN})")
        cur.execute(REACH, async_=True)
        seen: list[str] = []
        wait_for(lambda: seen.extend(cur.fetch_logs()) or
                 sum(line.startswith("reach: iteration ") for line in seen) >= 3, 120)
        started = time.monotonic()
        cur.cancel()
        wait_for(lambda: cur.poll().operationState == TOperationState.CANCELED_STATE, 10)
        wait_for(lambda: not spark.sparkContext.statusTracker().getActiveJobsIds(), 10)
        assert time.monotonic() - started < 10
        iterations = sum(line.startswith("reach: iteration ") for line in seen + cur.fetch_logs())
        assert iterations < CHAIN / 2  # stopped long before the fixpoint
        with pytest.raises(OperationalError, match="CANCELED|cancel"):
            cur.fetchall()
        cur.execute("SELECT count(*) FROM chain")
        assert cur.fetchall() == [(CHAIN,)]
    finally:
        connection.close()


@pytest.mark.parametrize("statement, sqlstate, condition", [
    ("SELEC 1", "42601", "PARSE_SYNTAX_ERROR"),
    ("SELECT nope FROM edge", "42703", "UNRESOLVED_COLUMN"),
    ("WITH recursive path (Dst, min() AS Cost) AS (SELECT 1, 0) UNION (SELECT edge.Dst, "
     "path.Cst + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) SELECT Dst, Cost FROM path",
     None, "Cst"),
])
def test_errors_arrive_as_error_state(server, statement, sqlstate, condition):
    with cursor(server) as cur:
        with pytest.raises(OperationalError) as raised:  # synchronous: the ExecuteStatement status
            cur.execute(statement)
        status = raised.value.args[0].status
        assert condition in status.errorMessage and status.errorMessage.startswith("[")
        assert "== SQL ==" in status.errorMessage and "^" in status.errorMessage  # the caret
        assert status.sqlState and (sqlstate is None or status.sqlState == sqlstate)
        cur.execute(statement, async_=True)  # asynchronous: the operation's ERROR state
        poll = wait_for(lambda: (p := cur.poll()).operationState == TOperationState.ERROR_STATE and p, 60)
        assert condition in poll.errorMessage and poll.sqlState == status.sqlState
        cur.execute("SELECT 41 + 1")  # the session goes on
        assert cur.fetchall() == [(42,)]
