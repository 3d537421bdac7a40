"""The server object `recsql.serve` returns: a transport on a port, the client sessions, and a
reaper closing sessions idle longer than the idle timeout."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable

from pyspark.sql import SparkSession

from recsql.server import auth
from recsql.server.operations import Sessions
from recsql.server.transports import BinaryServer, HttpServer


class Server:
    """A running `recsql serve`: `.port`, `.stop()`, `.wait()`."""

    def __init__(self, spark: SparkSession, *, host: str = "127.0.0.1", port: int = 10000,
                 transport: str = "binary", http_path: str = "cliservice", auth_mode: str = "none",
                 password_file: str | None = None, ssl_cert: str | None = None,
                 ssl_key: str | None = None, insecure: bool = False,
                 idle_session_timeout: float = 3600.0, handshake_timeout: float = 60.0,
                 init: Callable[[SparkSession], None] | None = None) -> None:
        auth.check_options(host, transport, auth_mode, password_file, ssl_cert, ssl_key, insecure)
        authenticator = (auth.PasswordFile(password_file) if auth_mode == "password"  # type: ignore[arg-type]
                         else auth.Anyone())
        context = tls_context(ssl_cert, ssl_key) if ssl_cert else None
        self.spark = spark
        self.host, self.transport, self.auth_mode = host, transport, auth_mode
        self.tls = context is not None
        self.sessions = Sessions(spark, init, idle_session_timeout)
        self._stopped = threading.Event()
        if transport == "http":
            self._server: BinaryServer | HttpServer = HttpServer(host, port, self.sessions,
                                                                 authenticator, context, http_path)
        else:
            self._server = BinaryServer(host, port, self.sessions, authenticator, context,
                                        handshake_timeout)
        self.port = self._server.port
        self.http_path = http_path
        self._reaper = threading.Thread(target=self._reap, name="recsql-serve-idle", daemon=True)
        self._server.start()
        self._reaper.start()

    def _reap(self) -> None:
        interval = max(0.05, min(self.sessions.idle_timeout / 4, 30.0))
        while not self._stopped.wait(interval):
            self.sessions.expire()

    @property
    def url(self) -> str:
        """A JDBC URL for this server (beeline -u ...)."""
        extra = f";transportMode=http;httpPath={self.http_path}" if self.transport == "http" else ""
        extra += ";ssl=true" if self.tls else ""
        return f"jdbc:hive2://{self.host}:{self.port}/default{extra}"

    def stop(self) -> None:
        """Cancel running operations, close every session and connection, free the port."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.sessions.close_all()
        self._server.stop()
        self.sessions.close_all()  # sessions opened while the transport was stopping
        self._reaper.join(10)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until `stop()` (from another thread or a signal handler); True if stopped."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context
