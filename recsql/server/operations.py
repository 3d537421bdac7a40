"""Sessions and operations. A client session owns a Spark session (`spark.newSession()`) and one
worker thread that runs its operations in order; operations of different sessions run at the
same time and Spark schedules their jobs. Each statement runs under its own job tag, so a
cancel interrupts its Spark jobs (`spark.interruptTag`), and its progress callback stops the
fixpoint between iterations."""

from __future__ import annotations

import itertools
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession

import recsql
from recsql.server import rowsets
from recsql.server.rowsets import ColumnSpec
from recsql.server.status import Cancelled, ProtocolError, describe

INITIALIZED, RUNNING, FINISHED, CANCELED, CLOSED, ERROR = (
    "INITIALIZED", "RUNNING", "FINISHED", "CANCELED", "CLOSED", "ERROR")


def new_handle() -> tuple[bytes, bytes]:
    return uuid.uuid4().bytes, uuid.uuid4().bytes


@dataclass
class Operation:
    """A statement or a metadata call. `rows` yields result rows in the wire form."""

    session: Session
    kind: int  # ttypes.TOperationType
    statement: str = ""
    work: Callable[[Operation], None] | None = None
    guid: bytes = field(default_factory=lambda: uuid.uuid4().bytes)
    secret: bytes = field(default_factory=lambda: uuid.uuid4().bytes)
    state: str = INITIALIZED
    error: BaseException | None = None
    specs: list[ColumnSpec] = field(default_factory=list)
    rows: Iterator[tuple] | None = None
    restart: Callable[[], Iterator[tuple]] | None = None  # FETCH_FIRST starts `rows` again
    table: pa.Table | None = None  # a statement's whole result (then `rows` is unused)
    position: int = 0
    log: list[str] = field(default_factory=list)
    log_position: int = 0
    started: float = 0.0
    completed: float = 0.0

    def __post_init__(self) -> None:
        self.lock = threading.Lock()  # state and log
        self.reading = threading.Lock()  # the result stream (a fetch may wait for a Spark job)
        self.done = threading.Event()
        self.tag = f"recsql-server-{self.guid.hex()}"

    # -- running (on the session's worker thread) -----------------------------------------------

    def run(self) -> None:
        with self.lock:
            if self.state != INITIALIZED:  # cancelled or closed while queued
                self.done.set()
                return
            self.state = RUNNING
            self.started = time.time()
        try:
            assert self.work is not None
            self.work(self)
            self._finish(FINISHED, None)
        except BaseException as error:  # noqa: BLE001 - every failure becomes the ERROR state
            self._finish(ERROR, error)

    def _finish(self, state: str, error: BaseException | None) -> None:
        with self.lock:
            if self.state == RUNNING:
                self.state, self.error = state, error
            self.completed = time.time()
        self.done.set()

    def on_iteration(self, stats: recsql.IterationStats) -> None:
        self.write_log(f"{stats.cte}: iteration {stats.iteration}, {stats.delta_rows} delta rows, "
                       f"{stats.total_rows} rows, {stats.seconds:.3f} s, on {stats.ran_on}")
        if self.state in (CANCELED, CLOSED):
            raise Cancelled(f"cancelled after iteration {stats.iteration} of {stats.cte}")

    def write_log(self, line: str) -> None:
        with self.lock:
            self.log.append(line)

    def check_live(self) -> None:
        if self.state in (CANCELED, CLOSED):
            raise Cancelled("cancelled")

    # -- control (from protocol threads) --------------------------------------------------------

    def cancel(self, final: str = CANCELED) -> None:
        """Stop it (CANCELED) or free it (CLOSED): interrupt its Spark jobs; a fixpoint stops at
        its next iteration."""
        with self.lock:
            queued, running = self.state == INITIALIZED, self.state == RUNNING
            if queued or running or final == CLOSED:
                self.state = final
        if running:
            self.write_log("recsql: cancelled; its Spark jobs were interrupted")
            try:
                self.session.spark.interruptTag(self.tag)
            except Exception:  # noqa: BLE001 - a stopped SparkContext has nothing to interrupt
                pass
        if queued:
            self.done.set()
        if final == CLOSED:
            self.rows, self.restart, self.table = None, None, None

    # -- results --------------------------------------------------------------------------------

    def fetch(self, max_rows: int, first: bool) -> tuple[list[tuple] | pa.Table, int]:
        if self.state != FINISHED:
            raise self.state_error()
        with self.reading:
            if self.table is not None:
                if first:
                    self.position = 0
                offset = self.position
                table = self.table.slice(offset, max_rows)
                self.position += table.num_rows
                return table, offset
            if first and self.restart is not None:
                self.rows, self.position = self.restart(), 0
            offset = self.position
            rows = self.rows
            batch = list(itertools.islice(rows, max_rows)) if rows is not None else []
            self.position += len(batch)
            return batch, offset

    def fetch_log(self, max_lines: int, first: bool) -> tuple[list[str], int]:
        with self.lock:
            if first:
                self.log_position = 0
            offset = self.log_position
            lines = self.log[offset: offset + max_lines]
            self.log_position += len(lines)
            return lines, offset

    def state_error(self) -> ProtocolError:
        if self.state == ERROR and self.error is not None:
            sqlstate, message = describe(self.error)
            return ProtocolError(message, sqlstate)
        return ProtocolError(f"Expected state FINISHED, but found {self.state}", "HY010")


class Session:
    """A client session: its Spark session, its operations and the worker running them."""

    def __init__(self, spark: SparkSession, user: str, protocol: int) -> None:
        self.guid, self.secret = new_handle()
        self.spark = spark
        self.user = user
        self.protocol = protocol
        self.operations: dict[bytes, Operation] = {}
        self.last_used = time.monotonic()
        self.closed = False
        self._queue: queue.Queue[Operation | None] = queue.Queue()
        self._worker = threading.Thread(target=self._work, name=f"recsql-session-{self.guid.hex()[:8]}",
                                        daemon=True)
        self._worker.start()

    def _work(self) -> None:
        while True:
            operation = self._queue.get()
            if operation is None:
                return
            operation.run()

    def submit(self, operation: Operation) -> Operation:
        if self.closed:
            raise ProtocolError("Invalid SessionHandle: the session is closed", "08003")
        self.operations[operation.guid] = operation
        self._queue.put(operation)
        return operation

    def run_now(self, operation: Operation) -> Operation:
        """Run a short operation (a metadata call) on the caller's thread, not behind the
        session's queued statements."""
        if self.closed:
            raise ProtocolError("Invalid SessionHandle: the session is closed", "08003")
        self.operations[operation.guid] = operation
        operation.run()
        return operation

    def busy(self) -> bool:
        return any(op.state in (INITIALIZED, RUNNING) for op in list(self.operations.values()))

    def close(self, wait: float = 10.0) -> None:
        self.closed = True
        for operation in list(self.operations.values()):
            operation.cancel(CLOSED)
        self.operations.clear()
        self._queue.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join(wait)


class Sessions:
    """Every open session of a server, by handle, with idle expiry."""

    def __init__(self, spark: SparkSession, init: Callable[[SparkSession], None] | None,
                 idle_timeout: float) -> None:
        self.spark = spark
        self.init = init
        self.idle_timeout = idle_timeout
        self._sessions: dict[bytes, Session] = {}
        self._lock = threading.Lock()

    def open(self, user: str, protocol: int) -> Session:
        spark = self.spark.newSession()
        if self.init is not None:
            self.init(spark)
        session = Session(spark, user, protocol)
        with self._lock:
            self._sessions[session.guid] = session
        return session

    def get(self, guid: bytes) -> Session:
        with self._lock:
            session = self._sessions.get(guid)
        if session is None:
            raise ProtocolError("Invalid SessionHandle: unknown or closed session", "08003")
        session.last_used = time.monotonic()
        return session

    def operation(self, guid: bytes) -> Operation:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            operation = session.operations.get(guid)
            if operation is not None:
                session.last_used = time.monotonic()
                return operation
        raise ProtocolError("Invalid OperationHandle: unknown or closed operation", "HY010")

    def close(self, guid: bytes) -> None:
        with self._lock:
            session = self._sessions.pop(guid, None)
        if session is None:
            raise ProtocolError("Invalid SessionHandle: unknown or closed session", "08003")
        session.close()

    def close_many(self, guids: Sequence[bytes]) -> None:
        for guid in guids:
            try:
                self.close(guid)
            except ProtocolError:
                pass

    def expire(self) -> int:
        """Close sessions idle (no running operation) longer than the idle timeout."""
        now = time.monotonic()
        with self._lock:
            idle = [s.guid for s in self._sessions.values()
                    if now - s.last_used > self.idle_timeout and not s.busy()]
        self.close_many(idle)
        return len(idle)

    def close_all(self) -> None:
        with self._lock:
            guids = list(self._sessions)
        self.close_many(guids)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def static_rows(operation: Operation, specs: list[ColumnSpec], rows: list[tuple]) -> None:
    """Give `operation` an in-memory result."""
    operation.specs = specs
    operation.restart = lambda: iter(rows)
    operation.rows = iter(rows)


# Spark's Thrift server's setting, with its meaning: stream a result a partition at a time
# instead of collecting it whole before the first fetch
INCREMENTAL_COLLECT = "spark.sql.thriftServer.incrementalCollect"


def frame_rows(operation: Operation, df) -> None:
    """Give `operation` a DataFrame's result; it is read here, so runtime errors surface as the
    operation's error.

    By default the whole result is collected as Arrow (one Spark job, as Spark's own Thrift
    server collects a result before its first fetch) and the driver holds it until the
    operation closes; Spark's `spark.driver.maxResultSize` bounds it. Measured against streaming
    with `toLocalIterator` (benchmarks/SERVER.md): a million rows of three columns reach the
    server in 0.6 s instead of 9 s, the first of them in 0.6 s instead of 5 s. With
    `spark.sql.thriftServer.incrementalCollect=true` (Spark's server's setting) the result
    streams partition by partition instead, for results the driver cannot hold."""
    specs = rowsets.specs_of(df.schema)
    operation.specs = specs
    if not specs:
        operation.rows, operation.restart = iter(()), None
        return
    wire = rowsets.wire_frame(df, specs)
    operation.check_live()
    incremental = operation.session.spark.conf.get(INCREMENTAL_COLLECT, "false")
    if str(incremental).strip().lower() != "true":
        operation.table = wire.toArrow()
        return

    def stream() -> Iterator[tuple]:
        return (tuple(row) for row in wire.toLocalIterator(prefetchPartitions=True))

    rows = stream()
    first = next(rows, None)
    operation.rows = rows if first is None else itertools.chain([first], rows)
    operation.restart = stream
