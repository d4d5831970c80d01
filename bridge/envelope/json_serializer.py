"""Kafka Connect JsonConverter-compatible bytes, with `schemas.enable` true or false.

What Connect writes (JsonConverter + Jackson's default ObjectMapper), reproduced here:
- compact JSON, struct fields in schema order, UTF-8 text as is up to U+FFFF; characters beyond
  it as escaped UTF-16 surrogate pairs (`\\uD83D\\uDE00`, Jackson's default);
- control characters escaped as `\\b \\t \\n \\f \\r` or `\\u00XX` with upper-case hex;
- float32/float64 written as Java's `Float.toString` / `Double.toString` (`1.0E10`, `2.71828`),
  NaN and infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`;
- bytes as standard padded base64;
- schemas on: `{"schema":<asJsonSchema>,"payload":<payload>}`; off: the payload alone;
- a null value with no schema (a tombstone) is no bytes at all (a null Kafka value).
"""

from __future__ import annotations

import base64
import re
from typing import Any

import orjson

from bridge.envelope.connect_schema import ConnectSchema, json_schema
from bridge.envelope.errors import SerializationError
from bridge.envelope.java_text import double_text, float_text
from bridge.envelope.types import Float32, Float64

_ESCAPE = re.compile(rb"\\(?:u00([0-9a-f]{2})|.)", re.DOTALL)
_BACKSLASH = ord("\\")
_SUPPLEMENTARY = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")


def _upper_hex_escape(match: re.Match[bytes]) -> bytes:
    digits = match.group(1)
    return match.group(0) if digits is None else b"\\u00" + digits.upper()


def _surrogate_pair_escape(match: re.Match[bytes]) -> bytes:
    code = ord(match.group(0).decode()) - 0x10000
    return b"\\u%04X\\u%04X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _number(text: str) -> orjson.Fragment:
    # Jackson quotes non-finite numbers (JsonWriteFeature.WRITE_NAN_AS_STRINGS is on by default).
    if text[-1].isdigit():
        return orjson.Fragment(text.encode())
    return orjson.Fragment(b'"' + text.encode() + b'"')


def _default(value: Any) -> Any:
    kind = value.__class__
    if kind is Float64:
        return _number(double_text(value))
    if kind is Float32:
        return _number(float_text(value))
    if kind is bytes:
        return base64.b64encode(value).decode()
    raise TypeError(f"no JSON form for {kind.__name__}")


def payload_bytes(value: Any) -> bytes:
    """The JSON of a Connect value as JsonConverter writes it."""
    try:
        out = orjson.dumps(value, default=_default)
    except TypeError as error:
        raise SerializationError(f"cannot write JSON: {error}") from error
    # orjson writes \u001f, Jackson \u001F. Looking for one byte is memchr, ten times quicker
    # than looking for the escape itself, and most texts have no backslash at all.
    if _BACKSLASH in out and b"\\u00" in out:
        out = _ESCAPE.sub(_upper_hex_escape, out)
    if not out.isascii():  # Jackson escapes characters beyond U+FFFF as UTF-16 surrogate pairs
        out = _SUPPLEMENTARY.sub(_surrogate_pair_escape, out)
    return out


class JsonSerializer:
    """One side (key or value) of a JsonConverter."""

    def __init__(self, schemas_enable: bool = True) -> None:
        self.schemas_enable = schemas_enable
        # `{"schema":<rendered>,"payload":` by schema identity; the schema is kept so its id
        # stays unique.
        self._prefixes: dict[int, tuple[ConnectSchema, bytes]] = {}

    def schema_bytes(self, schema: ConnectSchema) -> bytes:
        return orjson.dumps(json_schema(schema))

    def _prefix(self, schema: ConnectSchema) -> bytes:
        cached = self._prefixes.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = (schema, b'{"schema":' + self.schema_bytes(schema) + b',"payload":')
            self._prefixes[id(schema)] = cached
        return cached[1]

    def prepare(self, topic: str, schema: ConnectSchema) -> None:
        """Nothing to register: JSON carries its schema inline or not at all."""

    def serialize(self, topic: str, schema: ConnectSchema | None, value: Any) -> bytes | None:
        del topic  # JsonConverter does not use it
        if value is None and schema is None:
            return None
        payload = payload_bytes(value)
        if not self.schemas_enable:
            return payload
        prefix = b'{"schema":null,"payload":' if schema is None else self._prefix(schema)
        return b"".join((prefix, payload, b"}"))
