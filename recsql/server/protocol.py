"""The TCLIService handler: HiveServer2's calls mapped onto sessions and operations. Statements
go through `recsql.run` (recursive ones through the fixpoint, all others straight to Spark).

The Thrift definitions and the server-side `Processor` are the generated `TCLIService` modules
PyHive ships; this module only answers the calls."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from TCLIService import TCLIService, ttypes
from thrift.Thrift import TApplicationException, TMessageType

import recsql
from recsql.server import catalog, rowsets
from recsql.server.operations import (
    CANCELED,
    CLOSED,
    ERROR,
    FINISHED,
    INITIALIZED,
    RUNNING,
    Operation,
    Session,
    Sessions,
    frame_rows,
    static_rows,
)
from recsql.server.status import ProtocolError, failed, ok

V = ttypes.TProtocolVersion
MIN_PROTOCOL = V.HIVE_CLI_SERVICE_PROTOCOL_V6  # column-based row sets
MAX_PROTOCOL = max(V._VALUES_TO_NAMES)  # what the definitions know (V10)
MAX_FETCH_ROWS = 100_000
STATES = {INITIALIZED: ttypes.TOperationState.INITIALIZED_STATE,
          RUNNING: ttypes.TOperationState.RUNNING_STATE,
          FINISHED: ttypes.TOperationState.FINISHED_STATE,
          CANCELED: ttypes.TOperationState.CANCELED_STATE,
          CLOSED: ttypes.TOperationState.CLOSED_STATE,
          ERROR: ttypes.TOperationState.ERROR_STATE}
Op = ttypes.TOperationType
INFO = ttypes.TGetInfoType


def answers(response: type) -> Callable:
    """Turn any failure of a call into `response(status=ERROR_STATUS ...)`."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def call(self, req):
            try:
                return method(self, req)
            except Exception as error:  # noqa: BLE001 - a failed call never drops the connection
                return response(status=failed(error))
        return call
    return wrap


class Handler(TCLIService.Iface):
    """One per connection (binary transport) or one for all requests (HTTP). `user` is who the
    transport authenticated, if it did."""

    def __init__(self, sessions: Sessions, user: str | None = None,
                 alive: Callable[[], bool] | None = None) -> None:
        self.sessions = sessions
        self.user = user
        self.alive = alive  # is the client still connected (checked while a call waits)
        self.opened: list[bytes] = []  # sessions this connection opened: closed when it drops

    # -- sessions -------------------------------------------------------------------------------

    @answers(ttypes.TOpenSessionResp)
    def OpenSession(self, req):
        protocol = min(req.client_protocol, MAX_PROTOCOL)
        if protocol < MIN_PROTOCOL:
            raise ProtocolError(f"recsql serve needs protocol V6 or later (column-based row sets);"
                                f" the client asked for {V._VALUES_TO_NAMES.get(protocol)}", "08004")
        session = self.sessions.open(self.user or req.username or "anonymous", protocol)
        try:
            configure(session, req.configuration or {})
        except Exception:
            self.sessions.close(session.guid)
            raise
        self.opened.append(session.guid)
        return ttypes.TOpenSessionResp(status=ok(), serverProtocolVersion=protocol,
                                       sessionHandle=session_handle(session), configuration={})

    @answers(ttypes.TCloseSessionResp)
    def CloseSession(self, req):
        self.sessions.close(req.sessionHandle.sessionId.guid)
        return ttypes.TCloseSessionResp(status=ok())

    @answers(ttypes.TGetInfoResp)
    def GetInfo(self, req):
        session = self.sessions.get(req.sessionHandle.sessionId.guid)
        values = {INFO.CLI_SERVER_NAME: "recsql", INFO.CLI_DBMS_NAME: "Spark SQL",
                  INFO.CLI_DBMS_VER: session.spark.version}
        lengths = {INFO.CLI_MAX_COLUMN_NAME_LEN: 128, INFO.CLI_MAX_SCHEMA_NAME_LEN: 128,
                   INFO.CLI_MAX_TABLE_NAME_LEN: 128}
        if req.infoType in values:
            value = ttypes.TGetInfoValue(stringValue=values[req.infoType])
        elif req.infoType in lengths:
            value = ttypes.TGetInfoValue(lenValue=lengths[req.infoType])
        else:
            name = INFO._VALUES_TO_NAMES.get(req.infoType, req.infoType)
            raise ProtocolError(f"Unrecognized GetInfoType value: {name}", "HY096")
        return ttypes.TGetInfoResp(status=ok(), infoValue=value)

    # -- statements -----------------------------------------------------------------------------

    @answers(ttypes.TExecuteStatementResp)
    def ExecuteStatement(self, req):
        session = self.sessions.get(req.sessionHandle.sessionId.guid)
        operation = Operation(session, Op.EXECUTE_STATEMENT, req.statement, work=run_statement)
        operation.write_log(f"recsql: running {_label(req.statement)}")
        session.submit(operation)
        if not req.runAsync:
            while not operation.done.wait(0.5):
                if self.alive is not None and not self.alive():
                    operation.cancel()  # the client went away while waiting for the answer
                    break
            if operation.state == ERROR:
                raise operation.state_error()
        return ttypes.TExecuteStatementResp(status=ok(), operationHandle=operation_handle(operation))

    @answers(ttypes.TGetOperationStatusResp)
    def GetOperationStatus(self, req):
        operation = self.sessions.operation(req.operationHandle.operationId.guid)
        resp = ttypes.TGetOperationStatusResp(
            status=ok(), operationState=STATES[operation.state], hasResultSet=True,
            operationStarted=int(operation.started * 1000),
            operationCompleted=int(operation.completed * 1000))
        if operation.state == ERROR:
            error = operation.state_error()
            resp.sqlState, resp.errorCode, resp.errorMessage = error.sqlstate, 0, str(error)
        if req.getProgressUpdate:  # no job table to show (beeline's in-place progress)
            resp.progressUpdateResponse = ttypes.TProgressUpdateResp(
                headerNames=[], rows=[], progressedPercentage=1.0 if operation.done.is_set() else 0.0,
                status=ttypes.TJobExecutionStatus.NOT_AVAILABLE, footerSummary="",
                startTime=int(operation.started * 1000))
        return resp

    @answers(ttypes.TCancelOperationResp)
    def CancelOperation(self, req):
        operation = self.sessions.operation(req.operationHandle.operationId.guid)
        operation.cancel()
        return ttypes.TCancelOperationResp(status=ok())

    @answers(ttypes.TCloseOperationResp)
    def CloseOperation(self, req):
        operation = self.sessions.operation(req.operationHandle.operationId.guid)
        operation.cancel(CLOSED)
        operation.session.operations.pop(operation.guid, None)
        return ttypes.TCloseOperationResp(status=ok())

    @answers(ttypes.TGetResultSetMetadataResp)
    def GetResultSetMetadata(self, req):
        operation = self.sessions.operation(req.operationHandle.operationId.guid)
        if operation.state != FINISHED:
            raise operation.state_error()
        return ttypes.TGetResultSetMetadataResp(status=ok(),
                                                schema=rowsets.table_schema(operation.specs))

    @answers(ttypes.TFetchResultsResp)
    def FetchResults(self, req):
        operation = self.sessions.operation(req.operationHandle.operationId.guid)
        first = req.orientation == ttypes.TFetchOrientation.FETCH_FIRST
        count = max(1, min(req.maxRows or 1, MAX_FETCH_ROWS))
        if req.fetchType == 1:
            lines, offset = operation.fetch_log(count, first)
            return ttypes.TFetchResultsResp(status=ok(), hasMoreRows=False,
                                            results=rowsets.log_row_set(lines, offset))
        rows, offset = operation.fetch(count, first)
        # After the last row comes an empty row set (clients stop on it), as HiveServer2 does.
        return ttypes.TFetchResultsResp(status=ok(), hasMoreRows=len(rows) == count,
                                        results=rowsets.row_set(operation.specs, rows, offset))

    # -- metadata -------------------------------------------------------------------------------

    def _metadata(self, req, kind: int, lister: catalog.Lister):
        session = self.sessions.get(req.sessionHandle.sessionId.guid)

        def work(operation: Operation) -> None:
            specs, rows = lister(session.spark, req)
            static_rows(operation, specs, rows)

        operation = session.run_now(Operation(session, kind, work=work))
        if operation.state == ERROR:
            raise operation.state_error()
        return operation_handle(operation)

    @answers(ttypes.TGetTypeInfoResp)
    def GetTypeInfo(self, req):
        handle = self._metadata(req, Op.GET_TYPE_INFO, catalog.type_info)
        return ttypes.TGetTypeInfoResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetCatalogsResp)
    def GetCatalogs(self, req):
        handle = self._metadata(req, Op.GET_CATALOGS, catalog.catalogs)
        return ttypes.TGetCatalogsResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetSchemasResp)
    def GetSchemas(self, req):
        handle = self._metadata(req, Op.GET_SCHEMAS, catalog.schemas)
        return ttypes.TGetSchemasResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetTablesResp)
    def GetTables(self, req):
        handle = self._metadata(req, Op.GET_TABLES, catalog.tables)
        return ttypes.TGetTablesResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetTableTypesResp)
    def GetTableTypes(self, req):
        handle = self._metadata(req, Op.GET_TABLE_TYPES, catalog.table_types)
        return ttypes.TGetTableTypesResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetColumnsResp)
    def GetColumns(self, req):
        handle = self._metadata(req, Op.GET_COLUMNS, catalog.columns)
        return ttypes.TGetColumnsResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetFunctionsResp)
    def GetFunctions(self, req):
        handle = self._metadata(req, Op.GET_FUNCTIONS, catalog.functions)
        return ttypes.TGetFunctionsResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetPrimaryKeysResp)
    def GetPrimaryKeys(self, req):
        handle = self._metadata(req, Op.UNKNOWN, catalog.primary_keys)
        return ttypes.TGetPrimaryKeysResp(status=ok(), operationHandle=handle)

    @answers(ttypes.TGetCrossReferenceResp)
    def GetCrossReference(self, req):
        handle = self._metadata(req, Op.UNKNOWN, catalog.cross_reference)
        return ttypes.TGetCrossReferenceResp(status=ok(), operationHandle=handle)

    # -- not offered ----------------------------------------------------------------------------

    @answers(ttypes.TGetDelegationTokenResp)
    def GetDelegationToken(self, req):
        raise ProtocolError("Delegation tokens are not supported", "0A000")

    @answers(ttypes.TCancelDelegationTokenResp)
    def CancelDelegationToken(self, req):
        raise ProtocolError("Delegation tokens are not supported", "0A000")

    @answers(ttypes.TRenewDelegationTokenResp)
    def RenewDelegationToken(self, req):
        raise ProtocolError("Delegation tokens are not supported", "0A000")

    def disconnected(self) -> None:
        """The connection dropped: cancel its operations and release its sessions."""
        self.sessions.close_many(self.opened)
        self.opened.clear()


class Processor(TCLIService.Processor):
    """The generated processor, except GetLog, which HiveServer2 2.x dropped: it answers
    UNKNOWN_METHOD, so clients (PyHive's `fetch_logs`) read the log through FetchResults, as
    they do from Spark's server. (The request is read first: Thrift's generic skip cannot step
    over its binary handle.)"""

    def __init__(self, handler: Handler) -> None:
        super().__init__(handler)
        self._processMap["GetLog"] = Processor.process_GetLog

    def process_GetLog(self, seqid, iprot, oprot):
        TCLIService.GetLog_args().read(iprot)
        iprot.readMessageEnd()
        error = TApplicationException(TApplicationException.UNKNOWN_METHOD, "Unknown function GetLog")
        oprot.writeMessageBegin("GetLog", TMessageType.EXCEPTION, seqid)
        error.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()


def processor(handler: Handler) -> Processor:
    return Processor(handler)


def configure(session: Session, configuration: dict[str, str]) -> None:
    """The connection URL's `use:database`, `set:hiveconf:K=V` and plain settings."""
    for key, value in configuration.items():
        if key == "use:database":
            if value and value != "default":
                session.spark.catalog.setCurrentDatabase(value)
            continue
        if key.startswith("set:hivevar:"):
            continue
        name = key.removeprefix("set:hiveconf:")
        try:
            session.spark.conf.set(name, value)
        except Exception:
            if not name.startswith("hive."):  # Hive's own settings mean nothing to Spark
                raise


def run_statement(operation: Operation) -> None:
    spark = operation.session.spark
    spark.addTag(operation.tag)
    try:
        operation.check_live()
        started = time.monotonic()
        result = recsql.run(operation.statement, spark=spark, progress=operation.on_iteration)
        frame_rows(operation, result.df)
        operation.write_log(f"recsql: first rows ready after {time.monotonic() - started:.3f} s")
    finally:
        try:
            spark.removeTag(operation.tag)
        except Exception:  # noqa: BLE001 - the session may be gone already
            pass


def session_handle(session: Session) -> ttypes.TSessionHandle:
    return ttypes.TSessionHandle(sessionId=ttypes.THandleIdentifier(guid=session.guid,
                                                                    secret=session.secret))


def operation_handle(operation: Operation) -> ttypes.TOperationHandle:
    return ttypes.TOperationHandle(
        operationId=ttypes.THandleIdentifier(guid=operation.guid, secret=operation.secret),
        operationType=operation.kind, hasResultSet=True)


def _label(statement: str, width: int = 80) -> str:
    text = " ".join(statement.split())
    return text if len(text) <= width else text[: width - 3] + "..."

