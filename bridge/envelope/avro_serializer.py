"""Avro in the Confluent framing (magic byte 0, 4-byte big-endian schema id, Avro binary) against
a Confluent-compatible schema registry (subjects `<topic>-key` / `<topic>-value`).

This is the only module of `bridge.envelope` that does I/O: it registers each schema once per
subject (a table altered with a new column gives a new schema, hence a new registered version),
checks it with fastavro's schema parser, and encodes values with the schema's compiled encoder
(`avro_encoder`, the same bytes as fastavro's writer, about twice as fast on envelopes).
"""

from __future__ import annotations

import importlib
import json
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import fastavro

from bridge.envelope import connect_schema as cs
from bridge.envelope.avro_encoder import ENCODING_ERRORS, compile_unchecked, unfit
from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.errors import SerializationError

_HEADER = struct.Struct(">bI")
MAGIC_BYTE = 0


class SchemaRegistry(Protocol):
    """What is needed of `confluent_kafka.schema_registry.SchemaRegistryClient`."""

    def register_schema(self, subject_name: str, schema: Any, normalize_schemas: bool = False) -> int: ...


@dataclass(frozen=True, slots=True)
class _Compiled:
    schema: cs.ConnectSchema
    encode: Callable[[bytearray, Any], None]
    header: bytes


class AvroSerializer:
    """One side (key or value) of an AvroConverter."""

    def __init__(self, registry: SchemaRegistry, is_key: bool) -> None:
        self.registry = registry
        self.suffix = "-key" if is_key else "-value"
        self._compiled: dict[tuple[int, str], _Compiled] = {}

    def schema_id(self, topic: str, schema: cs.ConnectSchema) -> int:
        return int(_HEADER.unpack(self._compile(topic, schema).header)[1])

    def _compile(self, topic: str, schema: cs.ConnectSchema) -> _Compiled:
        cached = self._compiled.get((id(schema), topic))
        if cached is not None and cached.schema is schema:
            return cached
        definition = avro_schema(schema)
        try:
            fastavro.parse_schema(definition)  # a schema Avro tooling cannot read fails here, once
        except Exception as error:  # fastavro raises several exception types for bad schemas
            raise SerializationError(f"schema {schema.name} is not valid Avro: {error}") from error
        try:
            schema_id = self.registry.register_schema(topic + self.suffix, registry_schema(json.dumps(definition)))
        except Exception as error:  # the client raises its own error types and plain I/O errors
            raise SerializationError(f"registering the schema of subject {topic + self.suffix}: {error}") from error
        compiled = _Compiled(schema, compile_unchecked(schema), _HEADER.pack(MAGIC_BYTE, schema_id))
        self._compiled[(id(schema), topic)] = compiled
        return compiled

    def serialize(self, topic: str, schema: cs.ConnectSchema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise SerializationError(f"topic {topic}: an Avro value needs a schema")
        compiled = self._compiled.get((id(schema), topic))  # _compile's cache, without its call
        if compiled is None or compiled.schema is not schema:
            compiled = self._compile(topic, schema)
        out = bytearray(compiled.header)
        try:
            compiled.encode(out, value)
        except ENCODING_ERRORS as error:
            raise SerializationError(f"topic {topic}: {unfit(schema, error)}") from error
        return bytes(out)


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


def registry_client(url: str, **config: Any) -> SchemaRegistry:
    """A confluent-kafka registry client for a Confluent-compatible API (Apicurio's
    `/apis/ccompat/v7` works); `config` takes the client's other settings (for example
    `basic.auth.user.info`, `max.retries`)."""
    client: SchemaRegistry = _registry_module().SchemaRegistryClient({"url": url, **config})
    return client
