"""Kafka Connect schemas (the subset the envelope uses) and their JsonConverter rendering.

A `ConnectSchema` describes a key or value the way Kafka Connect's `Schema` does: a type, whether
it is optional, an optional name/version/parameters/default, and the members of structs and
arrays. Values that go with these schemas are plain Python data (see `bridge.envelope.types`).

`json_schema` renders a schema exactly as `JsonConverter.asJsonSchema` does (member order
`type`, `fields`/`items`, `optional`, `name`, `version`, `parameters`, `default`, and `field` for
struct members), so `{"schema": ..., "payload": ...}` messages are byte-compatible with Connect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INT8 = "int8"
INT16 = "int16"
INT32 = "int32"
INT64 = "int64"
FLOAT32 = "float"
FLOAT64 = "double"
BOOLEAN = "boolean"
STRING = "string"
BYTES = "bytes"
ARRAY = "array"
STRUCT = "struct"

PRIMITIVE_TYPES = frozenset({INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES})

# Logical types of org.apache.kafka.connect.data (version 1 each).
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
# Debezium's enum-of-strings semantic type.
DEBEZIUM_ENUM_NAME = "io.debezium.data.Enum"


@dataclass(frozen=True, slots=True)
class ConnectField:
    """One member of a struct schema."""

    name: str
    schema: ConnectSchema


@dataclass(frozen=True, slots=True)
class ConnectSchema:
    """A Kafka Connect schema. `parameters` keeps insertion order, as Connect's LinkedHashMap."""

    type: str
    optional: bool = False
    name: str | None = None
    version: int | None = None
    parameters: tuple[tuple[str, str], ...] | None = None
    default: str | None = None
    fields: tuple[ConnectField, ...] = ()
    items: ConnectSchema | None = None

    def __post_init__(self) -> None:
        if self.type == STRUCT and self.items is not None:
            raise ValueError("a struct schema has fields, not items")
        if self.type == ARRAY and self.items is None:
            raise ValueError("an array schema needs an items schema")
        if self.type not in PRIMITIVE_TYPES and self.type not in (ARRAY, STRUCT):
            raise ValueError(f"unknown Connect schema type {self.type!r}")

    def field(self, name: str) -> ConnectField:
        for member in self.fields:
            if member.name == name:
                return member
        raise KeyError(f"schema {self.name!r} has no field {name!r}")

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(member.name for member in self.fields)


def primitive(type_name: str, optional: bool = True) -> ConnectSchema:
    if type_name not in PRIMITIVE_TYPES:
        raise ValueError(f"{type_name!r} is not a primitive Connect type")
    return ConnectSchema(type_name, optional)


def struct(name: str, fields: list[ConnectField] | tuple[ConnectField, ...], optional: bool) -> ConnectSchema:
    names = [member.name for member in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"struct {name!r} has duplicate field names: {names}")
    return ConnectSchema(STRUCT, optional, name=name, fields=tuple(fields))


def array(items: ConnectSchema, optional: bool = True) -> ConnectSchema:
    return ConnectSchema(ARRAY, optional, items=items)


def date(optional: bool = True) -> ConnectSchema:
    return ConnectSchema(INT32, optional, name=DATE_NAME, version=1)


def timestamp(optional: bool = True) -> ConnectSchema:
    return ConnectSchema(INT64, optional, name=TIMESTAMP_NAME, version=1)


def debezium_enum(allowed: str, default: str, optional: bool = True) -> ConnectSchema:
    return ConnectSchema(
        STRING, optional, name=DEBEZIUM_ENUM_NAME, version=1, parameters=(("allowed", allowed),), default=default
    )


OPTIONAL_STRING = primitive(STRING)
OPTIONAL_INT64 = primitive(INT64)
REQUIRED_STRING = primitive(STRING, optional=False)
REQUIRED_INT64 = primitive(INT64, optional=False)


def json_schema(schema: ConnectSchema) -> dict[str, Any]:
    """The schema as JsonConverter writes it under `"schema"` (dict order = byte order)."""
    rendered: dict[str, Any] = {"type": schema.type}
    if schema.type == STRUCT:
        rendered["fields"] = [{**json_schema(member.schema), "field": member.name} for member in schema.fields]
    elif schema.type == ARRAY:
        assert schema.items is not None
        rendered["items"] = json_schema(schema.items)
    rendered["optional"] = schema.optional
    if schema.name is not None:
        rendered["name"] = schema.name
    if schema.version is not None:
        rendered["version"] = schema.version
    if schema.parameters is not None:
        rendered["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        rendered["default"] = schema.default
    return rendered
