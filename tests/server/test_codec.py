"""Thrift's compiled codec over PyHive's generated structs gives the bytes and the objects the
generated pure-Python code gives (the oracle), for the messages clients send and receive:
nested structs, lists, maps, unions, binary handles, UTF-8 text. No Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest
from TCLIService import TCLIService, ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport import TTransport

from recsql.server import codec, rowsets
from recsql.server.rowsets import ColumnSpec

HANDLE = ttypes.THandleIdentifier(guid=b"\x00\xff" * 8, secret=b"\x80" * 16)
OPERATION = ttypes.TOperationHandle(operationId=HANDLE, operationType=0, hasResultSet=True)
SESSION = ttypes.TSessionHandle(sessionId=HANDLE)
STATUS = ttypes.TStatus(statusCode=3, infoMessages=["*x:1:2", "ünï"], sqlState="42P01",
                        errorCode=7, errorMessage="[TABLE_OR_VIEW_NOT_FOUND] `edgé`")

MESSAGES = [
    ttypes.TOpenSessionReq(client_protocol=9, username="ana", password="",
                           configuration={"use:database": "analytics", "set:hiveconf:a": "é"}),
    ttypes.TOpenSessionResp(status=STATUS, serverProtocolVersion=9, sessionHandle=SESSION,
                            configuration={}),
    ttypes.TExecuteStatementReq(sessionHandle=SESSION, statement="SELECT 'ü' AS x",
                                confOverlay={"k": "v"}, runAsync=True, queryTimeout=0),
    ttypes.TGetOperationStatusReq(operationHandle=OPERATION, getProgressUpdate=True),
    ttypes.TGetOperationStatusResp(status=STATUS, operationState=2, hasResultSet=True,
                                   operationStarted=1, operationCompleted=2,
                                   progressUpdateResponse=ttypes.TProgressUpdateResp(
                                       headerNames=[], rows=[], progressedPercentage=1.0,
                                       status=2, footerSummary="", startTime=1)),
    ttypes.TGetResultSetMetadataResp(status=STATUS, schema=ttypes.TTableSchema(columns=[
        ColumnSpec("d", ttypes.TTypeId.DECIMAL_TYPE, "cast", precision=10, scale=2).desc(1),
        ColumnSpec("s", ttypes.TTypeId.STRING_TYPE, "string").desc(2)])),
    ttypes.TFetchResultsReq(operationHandle=OPERATION, orientation=4, maxRows=10_000, fetchType=0),
    ttypes.TGetTablesReq(sessionHandle=SESSION, schemaName="%", tableName="e%",
                         tableTypes=["TABLE", "VIEW"]),
]


def pure(message) -> bytes:
    buffer = TTransport.TMemoryBuffer()
    message.write(TBinaryProtocol(buffer))
    return buffer.getvalue()


def compiled(message) -> bytes:
    buffer = TTransport.TMemoryBuffer()
    message.write(codec.Protocol(buffer))
    return buffer.getvalue()


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_encodes_and_decodes_as_the_generated_code(message) -> None:
    assert compiled(message) == pure(message)
    decoded = type(message)()
    decoded.read(codec.Protocol(TTransport.TMemoryBuffer(pure(message))))
    assert decoded == message


def test_every_generated_struct_has_a_spec_for_the_codec() -> None:
    structs = {cls for module in (ttypes, TCLIService) for cls in vars(module).values()
               if isinstance(cls, type) and getattr(cls, "thrift_spec", None) is not None}
    assert structs <= set(codec.SPECS) and ttypes.TGetOperationStatusReq in structs


def test_result_rows_encoded_in_bulk_are_written_as_they_are() -> None:
    """A fetch's row set holds bulk-encoded columns, which the codec cannot see into: the
    response is written by the pure-Python protocol, and reads back as the rows."""
    specs = [ColumnSpec("id", ttypes.TTypeId.BIGINT_TYPE, "i64"),
             ColumnSpec("s", ttypes.TTypeId.STRING_TYPE, "string")]
    table = pa.table({"id": [1, None, 3], "s": ["a", "é", None]})
    response = TCLIService.FetchResults_result(success=ttypes.TFetchResultsResp(
        status=ttypes.TStatus(statusCode=0), hasMoreRows=False,
        results=rowsets.row_set(specs, table, 0)))
    data = compiled(response)
    assert data == pure(response)
    decoded = TCLIService.FetchResults_result()
    decoded.read(TBinaryProtocol(TTransport.TMemoryBuffer(data)))
    ids, strings = decoded.success.results.columns
    assert ids.i64Val.values[0::2] == [1, 3] and strings.stringVal.values[:2] == ["a", "é"]
