"""Thrift's compiled binary codec (`thrift.protocol.fastbinary`) for PyHive's generated
`TCLIService` structs.

Why: Hive's JDBC driver 2.3 (the one Spark ships, beeline's) asks for the operation's status
before every row it reads, so a million-row fetch is a million `GetOperationStatus` round trips;
the generated pure-Python code spent about 30 us decoding and encoding each of them.

The generated code describes a struct-typed field as a tuple `(class, spec)`; the codec of
Thrift 0.11 and later reads a list `[class, spec]`. `SPECS` holds every struct's spec in the
codec's form, built once, and `Protocol` hands the codec those instead of the generated ones.
Responses that carry result rows are written by the pure-Python protocol: their columns are
encoded in bulk from Arrow (`rowsets.EncodedColumn`), not as the codec's structs. Where thrift
was installed without its C extension, `Protocol` is the pure-Python binary protocol.
"""

from __future__ import annotations

from TCLIService import TCLIService, ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TType
from thrift.transport import TTransport

try:  # built with the thrift package when a C compiler is at hand; pure Python without it
    from thrift.protocol import fastbinary
except ImportError:  # pragma: no cover - depends on how thrift was installed
    fastbinary = None


def _modern(spec: tuple) -> tuple:
    return tuple(None if field is None else (*field[:3], _modern_args(field[1], field[3]), *field[4:])
                 for field in spec)


def _modern_args(kind: int, args):
    if kind == TType.STRUCT:
        cls, spec = args
        return [cls, _modern(spec)]
    if kind in (TType.LIST, TType.SET):
        element, element_args, *rest = args
        return (element, _modern_args(element, element_args), *rest)
    if kind == TType.MAP:
        key, key_args, value, value_args, *rest = args
        return (key, _modern_args(key, key_args), value, _modern_args(value, value_args), *rest)
    return args


SPECS: dict[type, list] = {
    cls: [cls, _modern(spec)]
    for module in (ttypes, TCLIService) for cls in vars(module).values()
    if isinstance(cls, type) and (spec := getattr(cls, "thrift_spec", None)) is not None
}

# Structs that may hold bulk-encoded result columns, written by the pure-Python protocol
HOLDS_ROWS = frozenset({TCLIService.FetchResults_result, ttypes.TFetchResultsResp, ttypes.TRowSet})


def _decode(obj, iprot, args) -> None:
    fastbinary.decode_binary(obj, iprot, SPECS[args[0]])


def _encode(obj, args) -> bytes:
    if args[0] in HOLDS_ROWS:
        buffer = TTransport.TMemoryBuffer()
        obj.write(TBinaryProtocol(buffer))
        return buffer.getvalue()
    return fastbinary.encode_binary(obj, SPECS[args[0]])


class Protocol(TBinaryProtocol):
    """The binary protocol, with structs read and written by Thrift's compiled codec (the
    generated code calls `_fast_decode` and `_fast_encode` when they are set)."""

    def __init__(self, transport, **limits) -> None:
        super().__init__(transport, **limits)
        if fastbinary is not None:
            self._fast_decode, self._fast_encode = _decode, _encode
