"""JsonConverter byte compatibility: what Jackson writes for strings, numbers and bytes, and the
schema rendering (JsonConverter.asJsonSchema member order)."""

from __future__ import annotations

import json
import math

import pytest

from bridge.envelope import connect_schema as cs
from bridge.envelope.java_text import to_float32
from bridge.envelope.json_serializer import JsonSerializer, payload_bytes
from bridge.envelope.types import Float32, Float64


def test_strings_escape_like_jackson() -> None:
    """Short escapes for \\b \\t \\n \\f \\r, upper-case \\u00XX for other controls, quotes and
    backslashes escaped, characters beyond U+FFFF as surrogate pair escapes, everything else
    (DEL, other non-ASCII, U+2028, '/') written as UTF-8."""
    text = 'a"b\\c/\b\t\n\f\r\x00\x1f\x7fé\u2028😀𝄞'
    assert payload_bytes(text) == (
        b'"a\\"b\\\\c/\\b\\t\\n\\f\\r\\u0000\\u001F\x7f' + "é\u2028".encode() + b'\\uD83D\\uDE00\\uD834\\uDD1E"'
    )


def test_escape_fix_does_not_touch_an_escaped_backslash_before_u00() -> None:
    assert payload_bytes("\\u001f") == b'"\\\\u001f"'
    assert payload_bytes("\\\x1b") == b'"\\\\\\u001B"'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Float64(3.14159), b"3.14159"),
        (Float64(100.0), b"100.0"),
        (Float64(1e7), b"1.0E7"),
        (Float64(1.5e-5), b"1.5E-5"),
        (Float64(-0.0), b"-0.0"),
        (Float64(math.nan), b'"NaN"'),
        (Float64(math.inf), b'"Infinity"'),
        (Float64(-math.inf), b'"-Infinity"'),
        (Float32(to_float32(0.1)), b"0.1"),
        (Float32(to_float32(1e10)), b"1.0E10"),
        (Float32(to_float32(-2.5)), b"-2.5"),
    ],
)
def test_numbers_as_java_writes_them(value: float, expected: bytes) -> None:
    assert payload_bytes(value) == expected


def test_integers_booleans_nulls_and_bytes() -> None:
    assert payload_bytes({"a": 2**63 - 1, "b": -(2**63), "c": True, "d": None, "e": b"\xca\xfe\xba\xbe", "f": b""}) == (
        b'{"a":9223372036854775807,"b":-9223372036854775808,"c":true,"d":null,"e":"yv66vg==","f":""}'
    )


def test_struct_fields_keep_schema_order() -> None:
    assert payload_bytes({"z": 1, "a": 2}) == b'{"z":1,"a":2}'


SCHEMA = cs.struct(
    "P.ks.t.Key",
    [
        cs.ConnectField("ck", cs.primitive(cs.INT32)),
        cs.ConnectField("d", cs.date()),
        cs.ConnectField("e", cs.debezium_enum("a,b", "a")),
        cs.ConnectField("l", cs.array(cs.primitive(cs.STRING))),
        cs.ConnectField("s", cs.struct("P.X", [cs.ConnectField("x", cs.REQUIRED_INT64)], True)),
    ],
    False,
)


def test_schema_rendering_member_order() -> None:
    """type, fields/items, optional, name, version, parameters, default, then field."""
    assert JsonSerializer(True).schema_bytes(SCHEMA) == (
        b'{"type":"struct","fields":['
        b'{"type":"int32","optional":true,"field":"ck"},'
        b'{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"d"},'
        b'{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,'
        b'"parameters":{"allowed":"a,b"},"default":"a","field":"e"},'
        b'{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"l"},'
        b'{"type":"struct","fields":[{"type":"int64","optional":false,"field":"x"}],"optional":true,"name":"P.X",'
        b'"field":"s"}],"optional":false,"name":"P.ks.t.Key"}'
    )


def test_schemas_enable_wraps_schema_and_payload() -> None:
    value = {"ck": 1, "d": 19884, "e": "a", "l": ["x"], "s": None}
    on = JsonSerializer(True).serialize("t", SCHEMA, value)
    off = JsonSerializer(False).serialize("t", SCHEMA, value)
    assert off == b'{"ck":1,"d":19884,"e":"a","l":["x"],"s":null}'
    assert on is not None and json.loads(on) == {
        "schema": json.loads(JsonSerializer(True).schema_bytes(SCHEMA)),
        "payload": json.loads(off),
    }
    assert on.endswith(b',"payload":' + off + b"}")


def test_tombstone_is_no_bytes_and_null_with_schema_is_null_payload() -> None:
    """JsonConverter returns null only when schema and value are both null."""
    assert JsonSerializer(True).serialize("t", None, None) is None
    assert JsonSerializer(False).serialize("t", None, None) is None
    assert JsonSerializer(False).serialize("t", SCHEMA, None) == b"null"
    on = JsonSerializer(True).serialize("t", SCHEMA, None)
    assert on is not None and on.endswith(b',"payload":null}')


def test_unknown_python_values_are_refused() -> None:
    from bridge.envelope.errors import SerializationError

    with pytest.raises(SerializationError, match="complex"):
        payload_bytes({"x": 1j})


def test_plain_doubles_in_the_shared_range_are_written_as_java_writes_them() -> None:
    """float64 values between 1e-3 and 1e7 stay plain floats (orjson's fast path): there orjson,
    Python's repr and Java's Double.toString give the same text; elsewhere they become Float64."""
    import random
    import struct

    from bridge.envelope.java_text import double_text
    from bridge.envelope.types import map_type
    from bridge.scylla.schema import scalar

    convert = map_type(scalar("double"), "P.").convert
    rnd = random.Random(7)
    for _ in range(20000):
        value = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
        if math.isnan(value):
            continue
        converted = convert(value)
        assert (converted.__class__ is float) == (1e-3 <= abs(value) < 1e7)
        text = double_text(value)
        expected = text if text[-1].isdigit() else f'"{text}"'  # infinities are quoted, as NaN
        assert payload_bytes(converted) == expected.encode()
        in_range = rnd.uniform(1e-3, 1e7) * rnd.choice((1, -1))
        assert payload_bytes(convert(in_range)) == double_text(in_range).encode()
