"""The bulk encoding of Arrow columns, read back with the generated Thrift decoder (the oracle):
every wire form, nulls, empty columns, slices of a larger array, large strings. No Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest
from TCLIService import ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.transport import TTransport

from recsql.server import rowsets
from recsql.server.rowsets import ColumnSpec

TypeId = ttypes.TTypeId

CASES = [  # wire form, Arrow type, values (None: null)
    ("bool", pa.bool_(), [True, None, False, True, None, None, True, False, True]),
    ("byte", pa.int8(), [-128, 127, None, 0, 5]),
    ("i16", pa.int16(), [-32768, 32767, None, 1]),
    ("i32", pa.int32(), [-2**31, 2**31 - 1, None, 7]),
    ("i64", pa.int64(), [-2**63, 2**63 - 1, None, 0, 42]),
    ("double", pa.float64(), [1.5, -0.0, None, float("inf"), 1e-300]),
    ("double", pa.float32(), [1.5, None, 0.1]),
    ("string", pa.string(), ["héllo", "", None, "x" * 300, "日本"]),
    ("string", pa.large_string(), ["a", None, "bc"]),
    ("cast", pa.string(), [None, None]),
    ("json", pa.string(), ['{"a":1}', None]),
    ("binary", pa.binary(), [b"\xca\xfe", None, b"", b"\x00\xff"]),
    ("binary", pa.large_binary(), [b"\x01", None]),
]


def decoded(data: bytes) -> ttypes.TColumn:
    column = ttypes.TColumn()
    column.read(TBinaryProtocol(TTransport.TMemoryBuffer(data)))
    return column


def expected_nulls(values: list) -> list[bool]:
    return [value is None for value in values]


def read_back(spec: ColumnSpec, array: pa.Array) -> tuple[list, list[bool]]:
    column = decoded(rowsets.encode_column(spec, array))
    member = getattr(column, rowsets.WIRE[spec.wire][0])
    assert member is not None
    bits = member.nulls
    nulls = [bool(i >> 3 < len(bits) and bits[i >> 3] & (1 << (i & 7)))
             for i in range(len(member.values))]
    return member.values, nulls


@pytest.mark.parametrize(("wire", "arrow_type", "values"), CASES)
def test_every_wire_form_reads_back_with_its_nulls(wire, arrow_type, values):
    spec = ColumnSpec("c", TypeId.STRING_TYPE, wire)
    got, nulls = read_back(spec, pa.array(values, arrow_type))
    assert nulls == expected_nulls(values)
    filler = rowsets.WIRE[wire][2]
    if arrow_type == pa.float32():  # Arrow's float32, widened as Python widens it
        values = [None if v is None else float(pa.scalar(v, pa.float32()).as_py()) for v in values]
    assert got == [filler if v is None else v for v in values]


@pytest.mark.parametrize(("wire", "arrow_type", "values"), CASES)
def test_slices_and_empty_columns(wire, arrow_type, values):
    spec = ColumnSpec("c", TypeId.STRING_TYPE, wire)
    array = pa.array(values * 3, arrow_type)
    for start, length in [(1, len(values)), (len(values) + 2, 3), (2, 0), (0, 3 * len(values))]:
        part = array.slice(start, length)
        got, nulls = read_back(spec, part)
        assert nulls == expected_nulls(part.to_pylist())
        assert len(got) == len(part) == min(length, len(array) - start)
        assert [g for g, null in zip(got, nulls) if not null] == \
            [v for v in part.to_pylist() if v is not None] or arrow_type == pa.float32()


def test_null_bitmap_has_no_trailing_zero_bytes():
    values = [None] + [1] * 20
    spec = ColumnSpec("c", TypeId.BIGINT_TYPE, "i64")
    column = decoded(rowsets.encode_column(spec, pa.array(values, pa.int64())))
    assert column.i64Val.nulls == b"\x01"
    column = decoded(rowsets.encode_column(spec, pa.array([1] * 20, pa.int64())))
    assert column.i64Val.nulls == b""


def test_a_row_set_of_a_table_matches_the_generated_encoding():
    """The whole TRowSet, written through the generated code with encoded columns, reads back as
    the same row set the generated code writes from Python values."""
    specs = [ColumnSpec("i", TypeId.BIGINT_TYPE, "i64"), ColumnSpec("s", TypeId.STRING_TYPE),
             ColumnSpec("b", TypeId.BOOLEAN_TYPE, "bool")]
    rows = [(1, "a", True), (None, None, None), (3, "ccc", False)]
    table = pa.table({"i": pa.array([r[0] for r in rows], pa.int64()),
                      "s": pa.array([r[1] for r in rows], pa.string()),
                      "b": pa.array([r[2] for r in rows], pa.bool_())})

    def written(row_set: ttypes.TRowSet) -> bytes:
        buffer = TTransport.TMemoryBuffer()
        row_set.write(TBinaryProtocol(buffer))
        return buffer.getvalue()

    bulk = written(rowsets.row_set(specs, table, 10))
    generated = written(rowsets.row_set(specs, rows, 10))
    assert bulk == generated
    again = ttypes.TRowSet()
    again.read(TBinaryProtocol(TTransport.TMemoryBuffer(bulk)))
    assert again.startRowOffset == 10
    assert again.columns[1].stringVal.values == ["a", "", "ccc"]
