"""The two transports HiveServer2 clients speak, served with Apache Thrift's Python library.

- Binary: one thread per connection. The first byte tells SASL (START = 0x01, then PLAIN and
  length-framed messages) from a client without SASL (a strict binary-protocol message starts
  with 0x80), so both are served on the same port.
- HTTP: each POST to the HTTP path carries one binary-protocol message and gets the reply as its
  body; user and password come in a Basic `Authorization` header.

Both optionally speak TLS. A connection that drops has its operations cancelled and its
sessions released; a malformed frame or a bad SASL exchange closes that connection only.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import select
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from thrift.transport import TSocket, TTransport

from recsql.server import codec, sasl
from recsql.server.protocol import Handler, processor

log = logging.getLogger("recsql.server")

SASL_START, BINARY_MESSAGE = 0x01, 0x80
# Limits a malformed message cannot exceed (statements and row sets stay far below)
STRING_LIMIT, CONTAINER_LIMIT = 256 * 1024 * 1024, 16 * 1024 * 1024
MAX_HTTP_BODY = 256 * 1024 * 1024


def protocol(transport: TTransport.TTransportBase) -> codec.Protocol:
    return codec.Protocol(transport, string_length_limit=STRING_LIMIT,
                          container_length_limit=CONTAINER_LIMIT)


class _Replay(TTransport.TTransportBase):
    """A transport that first returns bytes already read (the peeked first byte)."""

    def __init__(self, head: bytes, inner: TTransport.TTransportBase) -> None:
        self.head, self.inner = head, inner

    def isOpen(self) -> bool:
        return self.inner.isOpen()

    def read(self, sz: int) -> bytes:
        if self.head:
            out, self.head = self.head[:sz], self.head[sz:]
            return out
        return self.inner.read(sz)

    def write(self, buf: bytes) -> None:
        self.inner.write(buf)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


def connected(sock: socket.socket) -> bool:
    """False once the peer has closed a connection the server is not reading from (a client
    that went away while its synchronous statement runs). TLS sockets cannot be peeked: True."""
    if isinstance(sock, ssl.SSLSocket):
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return not readable or sock.recv(1, socket.MSG_PEEK) != b""
    except (OSError, ValueError):
        return False


class Connections:
    """Open client sockets, so that stopping the server can shut them all down."""

    def __init__(self) -> None:
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def shutdown_all(self) -> None:
        with self._lock:
            socks = list(self._open)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class BinaryServer:
    """The binary transport: SASL PLAIN or no SASL on one port, a thread per connection."""

    def __init__(self, host: str, port: int, sessions, authenticator,
                 ssl_context: ssl.SSLContext | None, handshake_timeout: float = 60.0) -> None:
        self.sessions, self.authenticator = sessions, authenticator
        self.ssl_context, self.handshake_timeout = ssl_context, handshake_timeout
        self.listener = socket.create_server((host, port))
        self.listener.settimeout(0.25)  # the accept loop sees a stop within this time
        self.port = self.listener.getsockname()[1]
        self.connections = Connections()
        self.stopping = threading.Event()
        self.threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept_loop, name="recsql-serve-accept",
                                          daemon=True)

    def start(self) -> None:
        self._acceptor.start()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="recsql-serve-connection")
            with self._lock:
                self.threads = {t for t in self.threads if t.is_alive()} | {thread}
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        self.connections.add(conn)
        handler = None
        try:
            conn.settimeout(self.handshake_timeout)  # a client that sends nothing is dropped
            if self.ssl_context is not None:
                self.connections.discard(conn)
                conn = self.ssl_context.wrap_socket(conn, server_side=True)
                self.connections.add(conn)
            raw = TSocket.TSocket()
            raw.setHandle(conn)
            transport, user = self._open(raw)
            if transport is None:
                return
            conn.settimeout(None)  # long queries keep idle connections open
            handler = Handler(self.sessions, user, alive=lambda: connected(conn))
            proc, prot = processor(handler), protocol(transport)
            while not self.stopping.is_set():
                proc.process(prot, prot)
        except (TTransport.TTransportException, sasl.SaslError, OSError, EOFError):
            pass  # the client went away, sent garbage or failed to authenticate
        except Exception:  # noqa: BLE001 - one connection's failure never stops the server
            log.exception("recsql serve: connection failed")
        finally:
            if handler is not None:
                handler.disconnected()
            self.connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _open(self, raw: TSocket.TSocket) -> tuple[TTransport.TTransportBase | None, str | None]:
        """Tell SASL from plain binary by the first byte; authenticate."""
        first = raw.readAll(1)
        if first[0] == SASL_START:
            user = sasl.handshake(raw, self.authenticator.check)
            return TTransport.TFramedTransport(raw), user
        if first[0] == BINARY_MESSAGE and not self.authenticator.required:
            return TTransport.TBufferedTransport(_Replay(first, raw)), None
        return None, None  # no SASL while a password is required, or not a HiveServer2 client

    def stop(self, wait: float = 10.0) -> None:
        self.stopping.set()
        self._acceptor.join(wait)
        with contextlib.suppress(OSError):
            self.listener.close()
        self.connections.shutdown_all()
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(wait)


class _HttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "recsql"
    server: HttpServer

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.connections.discard(self.connection)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the stdlib's name
        log.debug("recsql serve http: " + format, *args)

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0].strip("/") != self.server.http_path:
            return self._reply(404, b"Not found")
        user = self._user()
        if user is None:
            return self._reply(401, b"Authentication failed",
                               {"WWW-Authenticate": 'Basic realm="recsql"'})
        body = self._body()
        if body is None:
            return self._reply(400, b"Bad request body")
        out = TTransport.TMemoryBuffer()
        handler = Handler(self.server.sessions, user or None)  # sessions outlive requests
        try:
            processor(handler).process(protocol(TTransport.TMemoryBuffer(body)), protocol(out))
        except Exception:  # noqa: BLE001 - a malformed message: this request fails, no more
            return self._reply(400, b"Malformed Thrift message")
        self._reply(200, out.getvalue(), {"Content-Type": "application/x-thrift"})

    def do_GET(self) -> None:
        self._reply(405, b"POST Thrift messages to the HTTP path")

    def _user(self) -> str | None:
        """The authenticated user ('' when none was given and none is needed), None if refused."""
        header = self.headers.get("Authorization", "")
        user, password = "", ""
        if header.lower().startswith("basic "):
            try:
                user, _, password = base64.b64decode(header[6:].strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return None
        elif self.server.authenticator.required:
            return None
        return user if self.server.authenticator.check(user, password) else None

    def _body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                total += size
                if total > MAX_HTTP_BODY:
                    return None
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if 0 <= length <= MAX_HTTP_BODY else None

    def _reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpServer(ThreadingHTTPServer):
    """The HTTP transport (`transportMode=http;httpPath=cliservice`)."""

    daemon_threads = False  # server_close joins the request threads (their sockets shut first)
    block_on_close = True

    def __init__(self, host: str, port: int, sessions, authenticator,
                 ssl_context: ssl.SSLContext | None, http_path: str) -> None:
        self.sessions, self.authenticator = sessions, authenticator
        self.ssl_context, self.http_path = ssl_context, http_path.strip("/")
        self.connections = Connections()
        super().__init__((host, port), _HttpHandler)
        self.port = self.server_address[1]
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="recsql-serve-http", daemon=True)

    def get_request(self):
        conn, address = super().get_request()
        if self.ssl_context is not None:
            conn = self.ssl_context.wrap_socket(conn, server_side=True,
                                                do_handshake_on_connect=False)
        return conn, address

    def handle_error(self, request, client_address) -> None:
        log.debug("recsql serve http: request from %s failed", client_address, exc_info=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 10.0) -> None:
        self.shutdown()
        self._thread.join(wait)
        self.connections.shutdown_all()
        self.server_close()
