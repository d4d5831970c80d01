"""Connect schema -> Avro schema, the way Confluent's AvroConverter (AvroData) maps it.

- struct -> record; the Connect name splits at its last dot into namespace and name, and is kept
  in `connect.name` (plus `connect.version` when set). A name seen again is a reference. As Avro's
  Java `Schema.toString` writes them (so the registry holds the connector's text, byte for byte):
  a namespace equal to the enclosing record's is left out, and a reference within its own
  namespace is the short name.
- optional -> union `["null", T]` with field default null; an optional schema with a default
  (Debezium's `snapshot` enum) -> `[T, "null"]` with that default.
- int8/int16 -> int with `connect.type`; int32 -> int; int64 -> long; float32 -> float;
  float64 -> double; Date -> int `date`; Timestamp -> long `timestamp-millis`; other named
  primitives keep `connect.name`/`connect.version`/`connect.parameters`/`connect.default`.
- array -> array (items optional -> union).

Names are made valid for Java Avro (a registry parses what it stores with it) by the modes of
`bridge.envelope.names`: record names by `schema.name.adjustment.mode` (the Connect names are
already adjusted; a namespace part that starts with a digit is repaired here), field names by
`field.name.adjustment.mode`. `connect.name` keeps the Connect name. Two fields of one record, or
two different structs, that end up with one Avro name are refused with both names.
"""

from __future__ import annotations

from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.errors import SerializationError
from bridge.envelope.names import NameAdjustment, adjust_field_name, avro_full_name

_PRIMITIVES = {
    cs.INT8: "int",
    cs.INT16: "int",
    cs.INT32: "int",
    cs.INT64: "long",
    cs.FLOAT32: "float",
    cs.FLOAT64: "double",
    cs.BOOLEAN: "boolean",
    cs.STRING: "string",
    cs.BYTES: "bytes",
}
_PRIMITIVE_NAMES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record",
                              "enum", "array", "map", "union", "fixed"})
_LOGICAL = {cs.DATE_NAME: "date", cs.TIMESTAMP_NAME: "timestamp-millis"}


def split_name(full_name: str) -> tuple[str | None, str]:
    namespace, _, name = full_name.rpartition(".")
    return (namespace or None), name


class _Converter:
    def __init__(self, field_mode: NameAdjustment, name_mode: NameAdjustment) -> None:
        self.field_mode = field_mode
        self.name_mode = name_mode
        self.defined: dict[str, cs.ConnectSchema] = {}
        self.avro_names: dict[str, str] = {}  # Avro full name -> the Connect name it came from
        self.space: str | None = None  # the enclosing record's namespace, as Avro's Java writer tracks it

    def schema(self, schema: cs.ConnectSchema, ignore_optional: bool = False) -> Any:
        base = self._base(schema)
        if schema.optional and not ignore_optional:
            return [base, "null"] if schema.default is not None else ["null", base]
        return base

    def _base(self, schema: cs.ConnectSchema) -> Any:
        if schema.type == cs.STRUCT:
            return self._record(schema)
        if schema.type == cs.ARRAY:
            assert schema.items is not None
            return {"type": "array", "items": self.schema(schema.items)}
        avro: dict[str, Any] = {"type": _PRIMITIVES[schema.type]}
        if schema.type in (cs.INT8, cs.INT16):
            avro["connect.type"] = schema.type
        if schema.version is not None:
            avro["connect.version"] = schema.version
        if schema.parameters is not None:
            avro["connect.parameters"] = dict(schema.parameters)
        if schema.default is not None:
            avro["connect.default"] = schema.default
        if schema.name is not None:
            avro["connect.name"] = schema.name
            if schema.name in _LOGICAL:
                avro["logicalType"] = _LOGICAL[schema.name]
        return avro if len(avro) > 1 else avro["type"]

    def _record(self, schema: cs.ConnectSchema) -> Any:
        if schema.name is None:
            raise SerializationError("a struct schema without a name has no Avro record name")
        full_name = avro_full_name(schema.name, self.name_mode)
        known = self.defined.get(schema.name)
        if known is not None:
            if known != schema:
                raise SerializationError(f"two different structs are both named {schema.name!r}")
            return self._reference(full_name)
        taken = self.avro_names.setdefault(full_name, schema.name)
        if taken != schema.name:
            raise SerializationError(f"structs {taken!r} and {schema.name!r} both get the Avro name {full_name!r}")
        self.defined[schema.name] = schema
        namespace, name = split_name(full_name)
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace != self.space:  # Avro's Java writer leaves out a namespace the record inherits
            record["namespace"] = namespace or ""
        outer, self.space = self.space, namespace
        try:
            record["fields"] = self._fields(schema)
        finally:
            self.space = outer
        if schema.version is not None:
            record["connect.version"] = schema.version
        record["connect.name"] = schema.name
        return record

    def _reference(self, full_name: str) -> str:
        """A defined record's name as Avro's Java writer refers to it: short within its own
        namespace (unless the short name is a primitive type's), in full elsewhere."""
        namespace, name = split_name(full_name)
        if namespace is not None and namespace == self.space and name not in _PRIMITIVE_NAMES:
            return name
        return full_name

    def _fields(self, schema: cs.ConnectSchema) -> list[dict[str, Any]]:
        by_name: dict[str, str] = {}
        fields = []
        for member in schema.fields:
            name = adjust_field_name(member.name, self.field_mode)
            taken = by_name.setdefault(name, member.name)
            if taken != member.name:
                raise SerializationError(
                    f"fields {taken!r} and {member.name!r} of {schema.name} both get the Avro name {name!r}"
                    " (field.name.adjustment.mode; avro_unicode keeps them apart)"
                )
            fields.append(self._field(name, member))
        return fields

    def _field(self, name: str, member: cs.ConnectField) -> dict[str, Any]:
        field: dict[str, Any] = {"name": name, "type": self.schema(member.schema)}
        if member.schema.default is not None:
            field["default"] = member.schema.default
        elif member.schema.optional:
            field["default"] = None
        return field


def avro_schema(
    schema: cs.ConnectSchema,
    field_mode: NameAdjustment = NameAdjustment.AVRO,
    name_mode: NameAdjustment = NameAdjustment.AVRO,
) -> Any:
    """The Avro schema (JSON-ready) of a top-level key or value schema."""
    return _Converter(field_mode, name_mode).schema(schema)
