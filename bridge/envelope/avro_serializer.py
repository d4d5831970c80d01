"""Avro in the Confluent framing (magic byte 0, 4-byte big-endian schema id, Avro binary), with
fastavro, against a Confluent-compatible schema registry (subjects `<topic>-key`/`<topic>-value`).

This is the only module of `bridge.envelope` that does I/O: it registers each schema once per
subject (a table altered with a new column gives a new schema, hence a new registered version).

Speed: fastavro picks the branch of a union of records by validating the datum against every
branch, which dominates the cost of envelopes full of optional structs. A per-schema adapter,
compiled once, marks every non-null optional struct with fastavro's tuple notation
`(record full name, value)` so the branch is known.
"""

from __future__ import annotations

import importlib
import io
import json
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import fastavro

from bridge.envelope import connect_schema as cs
from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.errors import SerializationError

Adapter = Callable[[Any], Any]
_HEADER = struct.Struct(">bI")
MAGIC_BYTE = 0


class SchemaRegistry(Protocol):
    """What is needed of `confluent_kafka.schema_registry.SchemaRegistryClient`."""

    def register_schema(self, subject_name: str, schema: Any, normalize_schemas: bool = False) -> int: ...


def _struct_adapter(schema: cs.ConnectSchema) -> Adapter | None:
    members = [(m.name, _value_adapter(m.schema)) for m in schema.fields]
    needing = [(name, adapt) for name, adapt in members if adapt is not None]
    if not needing:
        return None

    def adapt_struct(value: dict[str, Any]) -> dict[str, Any]:
        out = dict(value)
        for name, adapt in needing:
            item = out[name]
            if item is not None:
                out[name] = adapt(item)
        return out

    return adapt_struct


def _value_adapter(schema: cs.ConnectSchema) -> Adapter | None:
    """Adapter for a non-null value of `schema`, or None when the value can go as it is."""
    if schema.type == cs.STRUCT:
        inner = _struct_adapter(schema)
        if not schema.optional:
            return inner
        branch = schema.name
        if inner is None:
            return lambda value: (branch, value)
        return lambda value: (branch, inner(value))
    if schema.type == cs.ARRAY:
        assert schema.items is not None
        item_adapter = _value_adapter(schema.items)
        if item_adapter is None:
            return None
        return lambda values: [None if v is None else item_adapter(v) for v in values]
    return None


@dataclass(frozen=True, slots=True)
class _Compiled:
    schema: cs.ConnectSchema
    parsed: Any
    adapter: Adapter | None
    header: bytes


class AvroSerializer:
    """One side (key or value) of an AvroConverter."""

    def __init__(self, registry: SchemaRegistry, is_key: bool) -> None:
        self.registry = registry
        self.suffix = "-key" if is_key else "-value"
        self._compiled: dict[tuple[int, str], _Compiled] = {}
        self._buffer = io.BytesIO()

    def schema_id(self, topic: str, schema: cs.ConnectSchema) -> int:
        return int(_HEADER.unpack(self._compile(topic, schema).header)[1])

    def _compile(self, topic: str, schema: cs.ConnectSchema) -> _Compiled:
        cached = self._compiled.get((id(schema), topic))
        if cached is not None and cached.schema is schema:
            return cached
        definition = avro_schema(schema)
        try:
            schema_id = self.registry.register_schema(topic + self.suffix, registry_schema(json.dumps(definition)))
        except Exception as error:  # the client raises its own error types and plain I/O errors
            raise SerializationError(f"registering the schema of subject {topic + self.suffix}: {error}") from error
        compiled = _Compiled(
            schema,
            fastavro.parse_schema(definition),
            _value_adapter(schema),
            _HEADER.pack(MAGIC_BYTE, schema_id),
        )
        self._compiled[(id(schema), topic)] = compiled
        return compiled

    def serialize(self, topic: str, schema: cs.ConnectSchema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise SerializationError(f"topic {topic}: an Avro value needs a schema")
        compiled = self._compile(topic, schema)
        datum = value if compiled.adapter is None else compiled.adapter(value)
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(compiled.header)
        try:
            fastavro.schemaless_writer(buffer, compiled.parsed, datum)
        except (ValueError, TypeError, KeyError) as error:
            raise SerializationError(f"topic {topic}: value does not fit schema {schema.name}: {error}") from error
        return buffer.getvalue()


def _registry_module() -> Any:
    """confluent_kafka.schema_registry, imported without the deprecation warning that authlib
    (which it imports) raises about its own httpx integration."""
    with warnings.catch_warnings():
        importlib.import_module("authlib.deprecate")  # installs an "always" filter; ours goes in front
        warnings.simplefilter("ignore", DeprecationWarning)
        import confluent_kafka.schema_registry as module
    return module


def registry_schema(text: str) -> Any:
    """An Avro schema text wrapped for the registry client."""
    return _registry_module().Schema(text, "AVRO")


def registry_client(url: str) -> SchemaRegistry:
    """A confluent-kafka registry client for a Confluent-compatible API (Apicurio's
    `/apis/ccompat/v7` works)."""
    client: SchemaRegistry = _registry_module().SchemaRegistryClient({"url": url})
    return client
