"""Avro binary encoding of Connect values, compiled once per schema. Pure: no I/O.

The bytes are exactly what fastavro's `schemaless_writer` writes for the schema's Avro form
(`avro_schema`); the unit tests check that on every golden record. It exists for speed: fastavro
spends most of an envelope's time choosing union branches (nearly every envelope field is an
optional, i.e. a union with null, and each cell is a union of null and a record); even with
tuple-notation branch hints it writes the typical 10-column envelope at well under half the rate
of this encoder (see `bench/envelope_bench.py`).

Compilation generates, once per schema, one Python function per struct with every field written
in line (the same technique as `dataclasses` and `attrs` use for `__init__`): an envelope then
costs a few calls instead of one per field. Names from the schema only ever appear as string
literals (`repr`), never as code. What repeats from one record to the next (the `source` block's
names, the high bits of times) is encoded once and remembered by the field's code.

Avro binary in brief: int/long are zig-zag varints; float/double little-endian IEEE; boolean one
byte; string/bytes a varint length then the bytes; a record its fields in order; an array blocks
of `count, items` ended by a 0 count; a union the varint index of the branch, then the value.
An optional Connect schema is the union `["null", T]` (index 1 = `0x02` when set), or `[T, "null"]`
when it has a default (Debezium's `snapshot`), as in `avro_schema`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.errors import SerializationError

Encoder = Callable[[bytearray, Any], None]

# Varints 14 bits at a time from tables (about 1 MB, built once): the complete varint of every
# value below 2^14, and the two continued bytes of every 14-bit group. Timestamps (6 to 8 per
# envelope, 40 to 62 bits) then take 3 or 4 lookups instead of a 7-step loop.
_FINAL = tuple(bytes((u & 0x7F | 0x80, u >> 7)) if u >= 0x80 else bytes((u,)) for u in range(0x4000))
_CONTINUED = tuple(bytes((u & 0x7F | 0x80, u >> 7 | 0x80)) for u in range(0x4000))
_GROUP = 0x3FFF
_INTEGERS = frozenset({cs.INT8, cs.INT16, cs.INT32, cs.INT64})
_NOTHING = object()  # what an empty string memo holds: no value is it


def varint(unsigned: int) -> bytes:
    """The base-128 varint of a non-negative int (already zig-zag encoded). Unrolled up to 70
    bits (every long): a loop costs more per group than the lookups themselves."""
    if unsigned < 0x4000:
        return _FINAL[unsigned]
    low = _CONTINUED[unsigned & _GROUP]
    if unsigned < 1 << 28:
        return low + _FINAL[unsigned >> 14]
    if unsigned < 1 << 42:
        return low + _CONTINUED[unsigned >> 14 & _GROUP] + _FINAL[unsigned >> 28]
    middle = _CONTINUED[unsigned >> 14 & _GROUP] + _CONTINUED[unsigned >> 28 & _GROUP]
    if unsigned < 1 << 56:
        return low + middle + _FINAL[unsigned >> 42]
    if unsigned < 1 << 70:
        return low + middle + _CONTINUED[unsigned >> 42 & _GROUP] + _FINAL[unsigned >> 56]
    return low + middle + _CONTINUED[unsigned >> 42 & _GROUP] + varint(unsigned >> 56)


# The encoded length of every string/bytes value shorter than 8 KiB (zig-zag: length × 2).
_SHORT_LENGTH = tuple(varint(length << 1) for length in range(0x2000))



def _length_prefix(size: str) -> str:
    """Code for the zig-zag varint of a length held in the local `size` (a table for short ones)."""
    return f"short_length[{size}] if {size} < 0x2000 else varint({size} << 1)"

class _Generator:
    """Writes the source of the encoder functions of one schema."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names = 0
        self.functions: dict[int, str] = {}  # id(struct schema) -> its function's name
        self.pending: list[tuple[str, cs.ConnectSchema]] = []
        self.memos: list[str] = []  # names of the memos of required strings and longs

    def local(self) -> str:
        self.names += 1
        return f"v{self.names}"

    def function_for(self, schema: cs.ConnectSchema) -> str:
        name = self.functions.get(id(schema))
        if name is None:
            name = f"encode_struct_{len(self.functions)}"
            self.functions[id(schema)] = name
            self.pending.append((name, schema))
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def value(self, schema: cs.ConnectSchema, var: str, depth: int) -> None:
        """Code writing the non-null value held in `var`."""
        kind = schema.type
        if kind == cs.INT64:
            self.long(var, depth)
        elif kind in _INTEGERS:
            zigzag = self.local()
            self.emit(depth, f"{zigzag} = ({var} << 1) ^ ({var} >> 63)")
            self.emit(depth, f"out += final[{zigzag}] if {zigzag} < 0x4000 else varint({zigzag})")
        elif kind == cs.STRING and not schema.optional:
            self.repeated_string(var, depth)
        elif kind == cs.STRING:
            data = self.local()
            self.emit(depth, f"{data} = {var}.encode()")
            self.length(data, depth)
            self.emit(depth, f"out += {data}")
        elif kind == cs.BYTES:
            self.length(var, depth)
            self.emit(depth, f"out += {var}")
        elif kind == cs.BOOLEAN:
            self.emit(depth, f"out.append(1 if {var} else 0)")
        elif kind == cs.FLOAT64:
            self.emit(depth, f"out += pack_double({var})")
        elif kind == cs.FLOAT32:
            self.emit(depth, f"out += pack_float({var})")
        elif kind == cs.STRUCT:
            self.emit(depth, f"{self.function_for(schema)}(out, {var})")
        else:
            self.array(schema, var, depth)

    def long(self, var: str, depth: int) -> None:
        """Code writing a long. Longs of 28 bits and more are mostly times (6 to 8 per envelope),
        whose high bits change rarely from one record to the next: the varint's bytes from bit 28
        on are remembered with those bits (like the string memos), the first 4 bytes come from
        the table."""
        zigzag, last, encoded = self.local(), self.local(), self.local()
        memo = f"memo_{len(self.memos)}"
        self.memos.append(memo)
        self.emit(depth, f"{zigzag} = ({var} << 1) ^ ({var} >> 63)")
        self.emit(depth, f"if {zigzag} < 0x1000_0000:")
        self.emit(depth + 1, f"out += final[{zigzag}] if {zigzag} < 0x4000 else varint({zigzag})")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{last} = {memo}[0]")
        self.emit(depth + 1, f"if {zigzag} >> 28 == {last}[0]:")
        self.emit(depth + 2, f"out += continued[{zigzag} & 0x3FFF]")
        self.emit(depth + 2, f"out += continued[{zigzag} >> 14 & 0x3FFF]")
        self.emit(depth + 2, f"out += {last}[1]")
        self.emit(depth + 1, "else:")
        self.emit(depth + 2, f"{encoded} = varint({zigzag})")
        self.emit(depth + 2, f"{memo}[0] = ({zigzag} >> 28, {encoded}[4:])")
        self.emit(depth + 2, f"out += {encoded}")

    def repeated_string(self, var: str, depth: int) -> None:
        """Code writing a required string, remembering its last value's encoding. Required
        strings are the `source` block's names (connector, prefix, keyspace, table...): the same
        str objects in every envelope of a table, so the encoding is nearly always reused. The
        memo is a one-element list holding a (str, bytes) tuple, replaced whole (thread-safe)."""
        memo, last, data, size = f"memo_{len(self.memos)}", self.local(), self.local(), self.local()
        self.memos.append(memo)
        self.emit(depth, f"{last} = {memo}[0]")
        self.emit(depth, f"if {var} is {last}[0]:")
        self.emit(depth + 1, f"out += {last}[1]")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{data} = {var}.encode()")
        self.emit(depth + 1, f"{size} = len({data})")
        self.emit(depth + 1, f"{data} = ({_length_prefix(size)}) + {data}")
        self.emit(depth + 1, f"{memo}[0] = ({var}, {data})")
        self.emit(depth + 1, f"out += {data}")

    def length(self, var: str, depth: int) -> None:
        """Code writing the length of the str/bytes in `var` (`len` once: it is a call)."""
        size = self.local()
        self.emit(depth, f"{size} = len({var})")
        self.emit(depth, f"out += {_length_prefix(size)}")

    def array(self, schema: cs.ConnectSchema, var: str, depth: int) -> None:
        assert schema.items is not None
        item = self.local()
        self.emit(depth, f"if {var}:")
        self.emit(depth + 1, f"out += varint(len({var}) << 1)")
        self.emit(depth + 1, f"for {item} in {var}:")
        self.field(schema.items, item, depth + 2)
        self.emit(depth, "out.append(0)")

    def field(self, schema: cs.ConnectSchema, var: str, depth: int) -> None:
        """Code writing `var`, which may be null when the schema is optional (a union)."""
        if not schema.optional:
            self.value(schema, var, depth)
            return
        null_byte, value_byte = _branch_bytes(schema)
        self.emit(depth, f"if {var} is None:")
        self.emit(depth + 1, f"out.append({null_byte})")
        self.emit(depth, "else:")
        if not _is_cell(schema):
            self.emit(depth + 1, f"out.append({value_byte})")
            self.value(schema, var, depth + 1)
            return
        # {"value": v}: the cell's branch and its field's branch go out together
        member = schema.fields[0].schema
        inner = self.local()
        self.emit(depth + 1, f"{inner} = {var}[{schema.fields[0].name!r}]")
        if not member.optional:
            self.emit(depth + 1, f"out.append({value_byte})")
            self.value(member, inner, depth + 1)
            return
        inner_null, inner_value = _branch_bytes(member)
        self.emit(depth + 1, f"if {inner} is None:")
        self.emit(depth + 2, f"out += {bytes((value_byte, inner_null))!r}")
        self.emit(depth + 1, "else:")
        self.emit(depth + 2, f"out += {bytes((value_byte, inner_value))!r}")
        self.value(member, inner, depth + 2)

    def struct_function(self, name: str, schema: cs.ConnectSchema) -> None:
        self.emit(0, f"def {name}(out, value):")
        for member in schema.fields:
            var = self.local()
            self.emit(1, f"{var} = value[{member.name!r}]")
            self.field(member.schema, var, 1)
        if not schema.fields:
            self.emit(1, "pass")

    def source(self, top: cs.ConnectSchema) -> str:
        if top.type == cs.STRUCT and not top.optional:
            self.functions[id(top)] = "encode"  # a record (every key and envelope): no wrapper call
            self.pending.append(("encode", top))
        else:
            self.emit(0, "def encode(out, value):")
            self.field(top, "value", 1)
        while self.pending:
            name, schema = self.pending.pop()
            if self.lines:
                self.emit(0, "")
            self.struct_function(name, schema)
        return "\n".join(self.lines) + "\n"


def _branch_bytes(schema: cs.ConnectSchema) -> tuple[int, int]:
    """The encoded union index of null and of the value: `["null", T]`, or `[T, "null"]` for a
    schema with a default."""
    return (2, 0) if schema.default is not None else (0, 2)


def _is_cell(schema: cs.ConnectSchema) -> bool:
    return (
        schema.type == cs.STRUCT
        and len(schema.fields) == 1
        and schema.fields[0].schema.type != cs.STRUCT
        and schema.fields[0].schema.type != cs.ARRAY
    )


def encoder_source(schema: cs.ConnectSchema) -> str:
    """The generated Python source of the encoder of `schema` (for reading and debugging)."""
    return _Generator().source(schema)


# What a generated encoder raises on a value that does not fit its schema.
ENCODING_ERRORS = (TypeError, KeyError, AttributeError, struct.error, UnicodeEncodeError)


def compile_unchecked(schema: cs.ConnectSchema) -> Encoder:
    """The generated encoder of `schema` as it is: a value that does not fit raises one of
    ENCODING_ERRORS (for callers that wrap errors themselves, without a call per value)."""
    generator = _Generator()
    source = generator.source(schema)
    namespace: dict[str, Any] = {
        "varint": varint,
        "final": _FINAL,
        "continued": _CONTINUED,
        "short_length": _SHORT_LENGTH,
        "pack_double": struct.Struct("<d").pack,
        "pack_float": struct.Struct("<f").pack,
    }
    for memo in generator.memos:
        namespace[memo] = [(_NOTHING, b"")]  # no value is _NOTHING: the first one misses
    # our generator's text; names from schemas only appear as repr() literals
    exec(compile(source, f"<avro encoder of {schema.name}>", "exec"), namespace)  # noqa: S102
    encode: Encoder = namespace["encode"]
    return encode


def unfit(schema: cs.ConnectSchema, error: Exception) -> SerializationError:
    """The error for a value that made the encoder of `schema` raise `error`."""
    return SerializationError(f"value does not fit schema {schema.name}: {error!r}")


def compile_encoder(schema: cs.ConnectSchema) -> Encoder:
    """An encoder that appends the Avro binary of a value of `schema` to a bytearray. A value
    that does not fit raises SerializationError."""
    encode = compile_unchecked(schema)

    def encode_checked(out: bytearray, value: Any) -> None:
        try:
            encode(out, value)
        except ENCODING_ERRORS as error:
            raise unfit(schema, error) from error

    return encode_checked
