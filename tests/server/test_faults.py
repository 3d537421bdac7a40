"""Bad input and faults: each gets a protocol-level error or a closed connection, and the server
keeps serving other clients."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

from TCLIService import ttypes

import recsql
from tests.server.clients import connect, cursor, wait_for


def raw(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=15)


def read_until_closed(sock: socket.socket) -> bytes:
    """What the server sent before closing (a close with unread input arrives as a reset)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def still_serves(server) -> None:
    with cursor(server) as cur:
        cur.execute("SELECT 1 + 1")
        assert cur.fetchall() == [(2,)]


def test_garbage_truncated_frames_and_bad_sasl_close_only_that_connection(server):
    with raw(server) as sock:  # a strict binary message header, then nonsense
        sock.sendall(b"\x80\x01\x00\x01\x00\x00\x00\x0bOpenSession\xff\xff\xff\xff\x7f")
        sock.shutdown(socket.SHUT_WR)
        read_until_closed(sock)
    with raw(server) as sock:  # neither SASL nor a binary message
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert read_until_closed(sock) == b""
    with raw(server) as sock:  # SASL with a mechanism the server does not offer
        sock.sendall(b"\x01" + struct.pack("!I", 6) + b"GSSAPI")
        reply = read_until_closed(sock)
        assert reply[0] == 4 and b"only PLAIN" in reply  # ERROR status, then closed
    with raw(server) as sock:  # a malformed PLAIN response
        sock.sendall(b"\x01" + struct.pack("!I", 5) + b"PLAIN" + b"\x05" + struct.pack("!I", 3) + b"abc")
        assert read_until_closed(sock)[0] == 4
    with raw(server) as sock:  # a good handshake, then a frame cut short
        sock.sendall(b"\x01" + struct.pack("!I", 5) + b"PLAIN" + b"\x05" + struct.pack("!I", 4) + b"\0u\0p")
        assert sock.recv(5) == b"\x05\x00\x00\x00\x00"  # COMPLETE
        sock.sendall(struct.pack("!I", 100) + b"\x80\x01\x00\x01")
        sock.shutdown(socket.SHUT_WR)
        read_until_closed(sock)
    still_serves(server)


def test_a_silent_client_is_dropped(spark):
    with recsql.serve(spark=spark, port=0, handshake_timeout=1) as server:
        started = time.monotonic()
        with raw(server) as sock:
            assert read_until_closed(sock) == b""
        assert time.monotonic() - started < 10
        still_serves(server)


def test_unknown_closed_and_exhausted_operations(server):
    connection = connect(server)
    try:
        client = connection.client
        unknown = ttypes.TOperationHandle(
            operationId=ttypes.THandleIdentifier(guid=uuid.uuid4().bytes, secret=uuid.uuid4().bytes),
            operationType=ttypes.TOperationType.EXECUTE_STATEMENT, hasResultSet=True)
        fetch = ttypes.TFetchResultsReq(operationHandle=unknown, orientation=0, maxRows=10)
        response = client.FetchResults(fetch)
        assert response.status.statusCode == ttypes.TStatusCode.ERROR_STATUS
        assert "Invalid OperationHandle" in response.status.errorMessage
        cur = connection.cursor()
        cur.execute("SELECT 7")
        fetch.operationHandle = cur._operationHandle
        assert client.FetchResults(fetch).results.columns[0].i32Val.values == [7]
        for _ in range(2):  # past the end: empty row sets, not errors
            response = client.FetchResults(fetch)
            assert response.status.statusCode == ttypes.TStatusCode.SUCCESS_STATUS
            assert response.results.columns[0].i32Val.values == []
        client.CloseOperation(ttypes.TCloseOperationReq(operationHandle=cur._operationHandle))
        assert client.FetchResults(fetch).status.statusCode == ttypes.TStatusCode.ERROR_STATUS
        bad_session = ttypes.TSessionHandle(sessionId=unknown.operationId)
        response = client.ExecuteStatement(ttypes.TExecuteStatementReq(bad_session, "SELECT 1"))
        assert response.status.statusCode == ttypes.TStatusCode.ERROR_STATUS
    finally:
        connection.close()


def test_a_client_that_disconnects_mid_query_has_it_cancelled(server, spark):
    """While its synchronous ExecuteStatement runs (the client waits for the answer)."""
    from pyhive import hive
    from thrift.transport import TSocket, TTransport

    before = len(server.sessions)
    sock = TSocket.TSocket("127.0.0.1", server.port)  # NOSASL, as `connect` does, but held here
    connection = hive.Connection(thrift_transport=TTransport.TBufferedTransport(sock),
                                 configuration={"spark.recsql.endgame.enabled": "false"})
    cur = connection.cursor()
    cur.execute("CREATE TEMPORARY VIEW chain AS SELECT id AS Src, id + 1 AS Dst FROM range(2000)")
    waiting = threading.Thread(target=_run, args=(cur,))
    waiting.start()

    def iterating() -> bool:  # the server's own record of the running statement
        logs = [line for s in list(server.sessions._sessions.values())
                for op in list(s.operations.values()) for line in list(op.log)]
        return any(line.startswith("reach: iteration 1") for line in logs)

    wait_for(iterating, 120)
    sock.handle.shutdown(socket.SHUT_RDWR)  # no CloseSession: the connection just goes away
    wait_for(lambda: len(server.sessions) == before, 15)
    wait_for(lambda: not spark.sparkContext.statusTracker().getActiveJobsIds(), 10)
    waiting.join(30)
    still_serves(server)


def _run(cur) -> None:
    try:
        cur.execute("""WITH recursive reach (Node) AS (SELECT 0)
            UNION (SELECT chain.Dst FROM reach, chain WHERE reach.Node = chain.Src)
            SELECT count(*) FROM reach""")  # synchronous
    except Exception:  # noqa: BLE001 - the transport is closed under it
        pass
