"""Avro in the Confluent framing (magic byte 0, 4-byte big-endian schema id, Avro binary) against
a Confluent-compatible schema registry (subjects `<topic>-key` / `<topic>-value`).

`register` registers a schema once per subject through the `SchemaRegistry` it is given (a
table altered with a new column gives a new schema, hence a new registered version), checks it
with fastavro's schema parser and compiles its encoder (`avro_encoder`, the same bytes as
fastavro's writer, about twice as fast on envelopes). `serialize` only encodes:
it never calls the registry, so no HTTP request waits inside a Kafka transaction. Schemas are
registered when a plan is built (`RecordSerializer.prepare`, called by the `Translator`); a
schema that was not is refused.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import fastavro

from bridge.envelope import connect_schema as cs
from bridge.envelope.avro_encoder import ENCODING_ERRORS, compile_unchecked, unfit
from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.errors import SerializationError
from bridge.envelope.names import NameAdjustment

_HEADER = struct.Struct(">bI")
MAGIC_BYTE = 0


class SchemaRegistry(Protocol):
    """What the serializer needs of a registry: register an Avro schema text under a subject and
    get its id. `bridge.kafka.registry.registry_client` is the real one (confluent-kafka's client, kept
    out of this package, which does no I/O of its own), `bridge_devstack.testing.InProcessRegistry` the
    in-memory twin."""

    def register_avro(self, subject: str, schema_text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class _Compiled:
    schema: cs.ConnectSchema
    encode: Callable[[bytearray, Any], None]
    header: bytes


class AvroSerializer:
    """One side (key or value) of an AvroConverter. The adjustment modes make the registered
    names valid Java Avro names (`bridge.envelope.names`); they do not change the bytes."""

    def __init__(
        self,
        registry: SchemaRegistry,
        is_key: bool,
        field_mode: NameAdjustment = NameAdjustment.AVRO,
        name_mode: NameAdjustment = NameAdjustment.AVRO,
    ) -> None:
        self.registry = registry
        self.suffix = "-key" if is_key else "-value"
        self.field_mode = field_mode
        self.name_mode = name_mode
        self._compiled: dict[tuple[int, str], _Compiled] = {}  # by the schema's identity: no hashing per record
        self._registered: dict[tuple[cs.ConnectSchema, str], _Compiled] = {}  # by value

    def prepare(self, topic: str, schema: cs.ConnectSchema) -> None:
        self.register(topic, schema)

    def register(self, topic: str, schema: cs.ConnectSchema) -> int:
        """Registers `schema` under `<topic>-key|value` (once; later calls answer from the cache)
        and returns its id. Raises SerializationError naming the subject."""
        cached = self._lookup(topic, schema)
        if cached is not None:
            return int(_HEADER.unpack(cached.header)[1])
        definition = avro_schema(schema, self.field_mode, self.name_mode)
        try:
            fastavro.parse_schema(definition)  # a schema Avro tooling cannot read fails here, once
        except Exception as error:  # fastavro raises several exception types for bad schemas
            raise SerializationError(f"schema {schema.name} is not valid Avro: {error}") from error
        try:
            # Compact, non-ASCII as is: the text Avro's Java `Schema.toString` gives the connector's
            # registrations, so a registry that keys schemas by text (Apicurio) finds them equal.
            text = json.dumps(definition, separators=(",", ":"), ensure_ascii=False)
            schema_id = self.registry.register_avro(topic + self.suffix, text)
        except Exception as error:  # the client raises its own error types and plain I/O errors
            raise SerializationError(f"registering the schema of subject {topic + self.suffix}: {error}") from error
        compiled = _Compiled(schema, compile_unchecked(schema), _HEADER.pack(MAGIC_BYTE, schema_id))
        self._compiled[(id(schema), topic)] = self._registered[(schema, topic)] = compiled
        return int(schema_id)

    def _lookup(self, topic: str, schema: cs.ConnectSchema) -> _Compiled | None:
        """The registered schema: by identity, or else by value (an equal schema of another plan
        object, for example one built by a second Translator), then remembered by identity."""
        compiled = self._compiled.get((id(schema), topic))
        if compiled is not None and compiled.schema is schema:
            return compiled
        compiled = self._registered.get((schema, topic))
        if compiled is not None:
            compiled = _Compiled(schema, compiled.encode, compiled.header)
            self._compiled[(id(schema), topic)] = compiled
        return compiled

    def serialize(self, topic: str, schema: cs.ConnectSchema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise SerializationError(f"topic {topic}: an Avro value needs a schema")
        compiled = self._compiled.get((id(schema), topic))
        if compiled is None or compiled.schema is not schema:
            compiled = self._lookup(topic, schema)
        if compiled is None:
            raise SerializationError(
                f"topic {topic}: schema {schema.name} is not registered under {topic + self.suffix}"
                " (plans register their schemas when they are built)"
            )
        out = bytearray(compiled.header)
        try:
            compiled.encode(out, value)
        except ENCODING_ERRORS as error:
            raise SerializationError(f"topic {topic}: {unfit(schema, error)}") from error
        return bytes(out)
