"""The Connect schema of a flattened value, as Kafka Connect's JsonConverter would write it after
ExtractNewRecordState + ScyllaExtractNewRecordState (pure; JSON members in JsonConverter's order:
type, fields/items/keys/values, optional, name, version, doc, parameters, default, field).

- The value schema is a copy of `after`'s (`before`'s for a rewritten delete) via
  `SchemaUtil.copySchemaBasics`: name, version, doc and parameters kept, `optional` false.
- A cell field `X` (`*.Cell {value}`) takes its inner schema, made optional (ScyllaExtractNewRecordState).
- `__deleted` is an optional string (InsertField's static field); `add.fields` entries copy the
  source field's basics (not its default) and are optional, in that order after `__deleted`.
"""

from __future__ import annotations

from typing import Any

import orjson

from bridge.spark.core.smt_options import DELETED_FIELD, SmtOptions

_ORDER = ("type", "fields", "items", "keys", "values", "optional", "name", "version", "doc", "parameters",
          "default", "field")
_PRIMITIVE = frozenset({"int8", "int16", "int32", "int64", "float", "double", "boolean", "string", "bytes"})


def _ordered(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: schema[key] for key in _ORDER if key in schema}


def _basics(schema: dict[str, Any], *, optional: bool) -> dict[str, Any]:
    """`SchemaUtil.copySchemaBasics` onto a builder of the same type (no fields, no default)."""
    copied: dict[str, Any] = {"type": schema["type"], "optional": optional}
    for key in ("name", "version", "doc", "parameters"):
        if key in schema:
            copied[key] = schema[key]
    return copied


def _make_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """ScyllaExtractNewRecordState.makeOptional: primitives rebuilt (name, doc, default, parameters
    kept; version is not), complex types unchanged."""
    if schema.get("optional") or schema["type"] not in _PRIMITIVE:
        return schema
    rebuilt: dict[str, Any] = {"type": schema["type"], "optional": True}
    for key in ("name", "doc", "parameters", "default"):
        if key in schema:
            rebuilt[key] = schema[key]
    return rebuilt


def field_of(envelope: dict[str, Any], name: str) -> dict[str, Any] | None:
    for field in envelope.get("fields", []):
        if field.get("field") == name:
            return dict(field)
    return None


def is_cell(schema: dict[str, Any]) -> bool:
    fields = schema.get("fields") or []
    return (schema.get("type") == "struct" and str(schema.get("name") or "").endswith(".Cell")
            and len(fields) == 1 and fields[0].get("field") == "value")


def _without_field(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "field"}


def optional_after_schema_json(envelope: dict[str, Any]) -> str:
    """The value schema of a `tombstone`-mode delete: `after`'s schema as it is (cells included)."""
    after = field_of(envelope, "after")
    assert after is not None
    return orjson.dumps(_ordered(_without_field(after))).decode()


def reference_schema(envelope: dict[str, Any], struct: str | None, field: str) -> dict[str, Any] | None:
    parent = envelope if struct is None else field_of(envelope, struct)
    if parent is None or parent.get("type") != "struct":
        return None
    return field_of(parent, field)


def flattened_schema(envelope: dict[str, Any], side: str, options: SmtOptions) -> dict[str, Any]:
    row = field_of(envelope, side)
    assert row is not None
    changed = options.unwrap_cells or options.rewrite or bool(options.add_fields)
    if not changed:
        return _ordered(_without_field(row))
    fields: list[dict[str, Any]] = []
    for field in row.get("fields", []):
        if options.unwrap_cells and is_cell(field):
            inner = _make_optional(_without_field(field["fields"][0]))
            fields.append(_ordered({**inner, "field": field["field"]}))
        else:
            fields.append(_ordered(field))
    if options.rewrite:
        fields.append({"type": "string", "optional": True, "field": DELETED_FIELD})
    for ref in options.add_fields:
        source = reference_schema(envelope, ref.struct, ref.field)
        if source is not None:
            fields.append(_ordered({**_basics(source, optional=True), "field": ref.new_name}))
    result = _basics(row, optional=False)
    result["fields"] = fields
    return _ordered(result)


def flattened_schema_json(envelope: dict[str, Any], side: str, options: SmtOptions) -> str:
    return orjson.dumps(flattened_schema(envelope, side, options)).decode()
