"""The server side of the SASL PLAIN handshake HiveServer2 clients start with (the Hive JDBC
driver by default, PyHive's and impyla's `PLAIN`/`LDAP`/`CUSTOM`). Each frame is a status byte,
a 4-byte big-endian length and the payload: the client sends START with the mechanism name, then
OK or COMPLETE with `authzid NUL user NUL password`; the server answers COMPLETE (or BAD). After
it every Thrift message travels in a 4-byte length frame (no QOP wrapping with PLAIN), which is
Thrift's `TFramedTransport`."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NoReturn

from thrift.transport.TTransport import TTransportBase

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
MAX_PAYLOAD = 64 * 1024


class SaslError(Exception):
    """The exchange failed; the peer has been told."""


def handshake(transport: TTransportBase, check: Callable[[str, str], bool]) -> str:
    """Run PLAIN after the client's START status byte was read; returns the user name."""
    mechanism = _payload(transport)
    if mechanism.upper() != b"PLAIN":
        _refuse(transport, ERROR, f"Unsupported SASL mechanism {mechanism[:40]!r}: only PLAIN")
    status, response = _frame(transport)
    if status not in (OK, COMPLETE):
        _refuse(transport, ERROR, f"Expected a PLAIN response, got status {status}")
    parts = response.split(b"\0")
    if len(parts) != 3:
        _refuse(transport, ERROR, "Malformed PLAIN response")
    try:
        user, password = parts[1].decode(), parts[2].decode()
    except UnicodeDecodeError:
        _refuse(transport, ERROR, "Malformed PLAIN response (not UTF-8)")
    if not check(user, password):
        _refuse(transport, BAD, f"Authentication failed for user {user!r}")
    _send(transport, COMPLETE, b"")
    return user


def _frame(transport: TTransportBase) -> tuple[int, bytes]:
    status = transport.readAll(1)[0]
    return status, _payload(transport)


def _payload(transport: TTransportBase) -> bytes:
    (length,) = struct.unpack("!I", transport.readAll(4))
    if length > MAX_PAYLOAD:
        _refuse(transport, ERROR, f"SASL frame of {length} bytes is too long")
    return transport.readAll(length) if length else b""


def _send(transport: TTransportBase, status: int, payload: bytes) -> None:
    transport.write(struct.pack("!BI", status, len(payload)) + payload)
    transport.flush()


def _refuse(transport: TTransportBase, status: int, message: str) -> NoReturn:
    try:
        _send(transport, status, message.encode())
    except Exception:  # noqa: BLE001 - the peer may be gone already
        pass
    raise SaslError(message)
