"""The flattening of `bridge.spark.flatten.flatten`, record by record in Python, for JSON with schemas:
what the tasks of `cdc-bridge spark flatten` run when they produce to Kafka (pure, no Spark).

The Spark-expression flattening parses every message into Spark's types and writes it back with
`to_json`, in a dozen Spark jobs per micro-batch (a pass to find each message's schema, one per
schema group, caching the batch between them): 200-400 µs of CPU per record. Here the schema part
of a message (`{"schema":...,"payload":...}`, four fifths of its bytes) is never parsed: its text
is the key of a plan built once per schema. Only the payload is parsed (orjson), reduced to the
flattened row, and written after the flattened schema's text, in the one Spark job that produces.

The output is the Spark flattening's, byte for byte (tests/spark/test_flatten_golden.py runs both
over the same records): strings and numbers are written back as Jackson writes them (the worker's
own JSON writer; `float32`/`float64` values, known from the schema, in Java's `Float.toString` /
`Double.toString`). Two differences, where this path writes what Kafka Connect's JsonConverter
writes and Spark's `to_json` does not: a character beyond U+FFFF is escaped as a UTF-16
surrogate pair (Spark writes it raw), and a map with keys that are not text stays the array of
`[key, value]` pairs JsonConverter wrote (Spark's path turns it into a quoted string, against its
own schema).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from bridge.envelope.errors import SerializationError
from bridge.envelope.json_serializer import payload_bytes
from bridge.envelope.types import Float32, Float64
from bridge.spark.core.errors import BadEnvelopeError
from bridge.spark.core.output_schema import (
    field_of,
    flattened_schema_json,
    is_cell,
    optional_after_schema_json,
    reference_schema,
)
from bridge.spark.core.smt_options import DELETED_FIELD, DeleteMode, FieldReference, SmtOptions

SCHEMA_HEAD = b'{"schema":'
PAYLOAD = b',"payload":'
Headers = list[tuple[str, bytes | None]]


def _present(schema: dict[str, Any], ref: FieldReference) -> bool:
    """The envelope's schema has the field `ref` names (absent ones are skipped, as in Debezium)."""
    return reference_schema(schema, ref.struct, ref.field) is not None


def _reference(envelope: dict[str, Any], ref: FieldReference) -> Any:
    if ref.struct is None:
        return envelope.get(ref.field)
    parent = envelope.get(ref.struct)
    return parent.get(ref.field) if isinstance(parent, dict) else None


def header_text(value: Any) -> bytes | None:
    """Connect's SimpleHeaderConverter (Spark's cast to string): strings as UTF-8, the rest as text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | float):
        return str(value).encode()
    return _dumps(value)


Wrap = Callable[[Any], Any]


def _float_wrap(schema: dict[str, Any]) -> Wrap | None:
    """What marks the floats of a value of this Connect schema as float32/float64 for the JSON
    writer (orjson reads `1.0E21` as a plain float, which it would write as `1e21`); None when
    the schema holds no float."""
    kind = schema.get("type")
    if kind in ("float64", "double"):
        return lambda v: Float64(v) if v.__class__ is float else v
    if kind in ("float32", "float"):
        return lambda v: Float32(v) if v.__class__ is float else v
    if kind == "array":
        items = _float_wrap(schema.get("items") or {})
        return None if items is None else (lambda v: [items(x) for x in v] if isinstance(v, list) else v)
    if kind == "map":
        keys, values = _float_wrap(schema.get("keys") or {}), _float_wrap(schema.get("values") or {})
        if keys is None and values is None:
            return None
        k, w = keys or (lambda x: x), values or (lambda x: x)
        return lambda v: ({a: w(b) for a, b in v.items()} if isinstance(v, dict)
                          else [[k(a), w(b)] for a, b in v] if isinstance(v, list) else v)
    if kind == "struct":
        fields = {str(f["field"]): wrap for f in schema.get("fields") or [] if (wrap := _float_wrap(f)) is not None}
        if not fields:
            return None
        return lambda v: ({name: (fields[name](x) if name in fields else x) for name, x in v.items()}
                          if isinstance(v, dict) else v)
    return None


def _loads(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # integers past 64 bits (a varint), which orjson refuses


def _dumps(value: Any) -> bytes:
    try:
        return payload_bytes(value)
    except SerializationError:  # an integer past 64 bits
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Flattened:
    value: bytes | None
    headers: Headers | None


class EnvelopePlan:
    """How the envelopes written with one Connect schema flatten."""

    def __init__(self, schema: dict[str, Any], options: SmtOptions, schemas_out: bool) -> None:
        after = field_of(schema, "after")
        if after is None or field_of(schema, "before") is None:
            raise BadEnvelopeError(f"an envelope schema without `after` and `before`: {schema.get('name')}")
        self._fields = tuple(_column(f, options.unwrap_cells and is_cell(f)) for f in after.get("fields", []))
        self._rewrite = options.rewrite
        self._drop_deletes = options.delete_mode is DeleteMode.DROP
        self._added = tuple(ref for ref in options.add_fields if _present(schema, ref))
        self._headers = tuple(ref for ref in options.add_headers if _present(schema, ref))
        self._heads = {side: SCHEMA_HEAD + flattened_schema_json(schema, side, options).encode() + PAYLOAD
                       if schemas_out else b"" for side in ("after", "before")}
        self._tail = b"}" if schemas_out else b""
        self._null: bytes | None = None
        if options.delete_mode is DeleteMode.TOMBSTONE:
            self._null = (SCHEMA_HEAD + optional_after_schema_json(schema).encode() + b',"payload":null}'
                          if schemas_out else b"null")

    def flatten(self, envelope: dict[str, Any], headers: Headers | None) -> Flattened | None:
        """The flattened record, or None when it flattens to nothing (a dropped delete, a truncate)."""
        after, before = envelope.get("after"), envelope.get("before")
        delete = after is None
        if delete and (before is None or self._drop_deletes):
            return None
        if self._headers:
            headers = [*(headers or []), *((ref.new_name, header_text(_reference(envelope, ref)))
                                           for ref in self._headers)]
        if delete and not self._rewrite:
            return Flattened(self._null, headers)
        row = before if delete else after
        if not isinstance(row, dict):
            raise BadEnvelopeError(f"`{'before' if delete else 'after'}` is not a row")
        flat = {name: _value(row.get(name), unwrap, wrap) for name, unwrap, wrap in self._fields}
        if self._rewrite:
            flat[DELETED_FIELD] = "true" if delete else "false"
        for ref in self._added:
            flat[ref.new_name] = _reference(envelope, ref)
        return Flattened(self._heads["before" if delete else "after"] + _dumps(flat) + self._tail, headers)


def _column(schema: dict[str, Any], unwrap: bool) -> tuple[str, bool, Wrap | None]:
    """A row field: its name, whether its cell is unwrapped, its float marking (of the value kept)."""
    kept = schema["fields"][0] if unwrap else schema
    return str(schema["field"]), unwrap, _float_wrap(kept)


def _value(value: Any, unwrap: bool, wrap: Wrap | None) -> Any:
    if unwrap:
        value = value.get("value") if isinstance(value, dict) else None
    return value if wrap is None or value is None else wrap(value)


class Flattener:
    """What a task flattens its records with (one per task): a message's bytes to its flattened
    record, the plans of the schemas met kept. The subclasses read a format."""

    def __init__(self, options: SmtOptions, schemas_out: bool) -> None:
        self._options, self._schemas_out = options, schemas_out
        self._tombstone_headers = tuple((ref.new_name, b"d") for ref in options.add_headers
                                        if ref.field == "op" and ref.struct is None)

    def flatten(self, value: bytes | None, headers: Headers | None,
                where: Callable[[], str]) -> Flattened | None:
        """None when the record flattens to nothing; `where()` names the record (topic, partition,
        offset) in an error."""
        if value is not None:
            return self.flatten_value(value, headers, where)
        if not self._options.keep_tombstones:  # Debezium's tombstone after a delete
            return None
        added = list(self._tombstone_headers)
        return Flattened(None, [*(headers or []), *added] if added else headers)

    def flatten_value(self, value: bytes, headers: Headers | None, where: Callable[[], str]) -> Flattened | None:
        raise NotImplementedError

    def plan(self, schema: Any, where: Callable[[], str]) -> EnvelopePlan | None:
        """The plan of a Connect schema; None when it is not an envelope's (passed unchanged)."""
        if not isinstance(schema, dict) or schema.get("type") != "struct" \
                or not str(schema.get("name") or "").endswith(".Envelope"):
            return None
        try:
            return EnvelopePlan(schema, self._options, self._schemas_out)
        except (BadEnvelopeError, KeyError, TypeError, IndexError) as error:
            raise BadEnvelopeError(f"{where()}: not a Connect envelope schema: {error!r}") from None

    @staticmethod
    def apply(plan: EnvelopePlan, envelope: Any, headers: Headers | None,
              where: Callable[[], str]) -> Flattened | None:
        if not isinstance(envelope, dict):
            raise BadEnvelopeError(f"{where()}: the payload is not an envelope object")
        try:
            return plan.flatten(envelope, headers)
        except BadEnvelopeError as error:
            raise BadEnvelopeError(f"{where()}: {error}") from None


class RecordFlattener(Flattener):
    """JSON with schemas (`{"schema":...,"payload":...}`), any topic and schema."""

    def __init__(self, options: SmtOptions, schemas_out: bool) -> None:
        super().__init__(options, schemas_out)
        self._plans: dict[bytes, EnvelopePlan | None] = {}  # schema text -> plan (None: not an envelope)

    def flatten_value(self, value: bytes, headers: Headers | None, where: Callable[[], str]) -> Flattened | None:
        cut = value.find(PAYLOAD)
        if not value.startswith(SCHEMA_HEAD) or cut < 0:
            raise BadEnvelopeError(f"{where()}: not JSON with a schema (is value.converter.schemas.enable=false? "
                                   "then use --format json)")
        schema_text = value[len(SCHEMA_HEAD):cut]
        if schema_text not in self._plans:
            try:
                schema = _loads(schema_text)
            except ValueError:
                raise BadEnvelopeError(f"{where()}: the schema part of the message is not JSON") from None
            self._plans[schema_text] = self.plan(schema, where)
        plan = self._plans[schema_text]
        if plan is None:
            return Flattened(value, headers)  # not an envelope (the dropped-changes topic): unchanged
        try:
            envelope = _loads(value[cut + len(PAYLOAD):-1])
        except ValueError as error:
            raise BadEnvelopeError(f"{where()}: the payload is not JSON: {error}") from None
        return self.apply(plan, envelope, headers, where)
