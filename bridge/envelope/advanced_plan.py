"""Per-table plans of the advanced format (`cdc.output.format=advanced`, the Java connector 2.x's).

Schemas as the connector's `ScyllaSchema` (scylla-cdc-source-connector 74d336e, the same at
v2.0.0), `P` = `<topic.prefix>.<keyspace>.<table>`, every struct name adjusted as in legacy:

- key `P.Key` (required struct): the partition key columns, then the clustering columns, each
  group in the log's column order (by name), optional schemas (`computeKeySchema`). It is the
  Kafka key with `kafka-key`, and the envelope's `<payload-key-name>` field with `payload-key`;
  without `kafka-key` the Kafka key is null (no schema).
- `P.Before` / `P.After` (optional structs): every column in the log's order (by name, key and
  value columns mixed, as legacy), plain optional values; key columns only with
  `payload-before` / `payload-after` (`computeRowSchema`). No cells, no element-change fields.
- `P.Envelope`: `source`, `before`, `after`, [`<payload-key-name>` with `payload-key`], `op`,
  `ts_ms`, `transaction`, `ts_us`, `ts_ns` (`computeDataCollectionSchema`).

Column schemas are those of `bridge.envelope.types` (the connector's `computeColumnSchema`); a
non-frozen collection or UDT has its frozen type's schema (a non-frozen list: array of values).
Nested structs of key columns (a frozen tuple, UDT or map key) are named without the `P.`
prefix, as the connector names them (`computeColumnSchema(type)` with an empty prefix).
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.advanced_code import (
    FullBuilder,
    HeaderBuilder,
    HeaderColumn,
    MergedBuilder,
    ModifiedColumns,
    OnlyUpdatedBuilder,
    StructColumn,
    compile_full,
    compile_headers,
    compile_merged,
    compile_modified,
    compile_only_updated,
)
from bridge.envelope.elements import map_multi_cell
from bridge.envelope.errors import PlanError, ValueConversionError
from bridge.envelope.names import SchemaNames
from bridge.envelope.plan import DroppedChangePlan, dropped_change_plan, log_order
from bridge.envelope.row_code import KeyBuilder, KeyColumnPlan, compile_key_builder
from bridge.envelope.settings import EnvelopeSettings, IncludeMode, KeyPlacement
from bridge.envelope.source_info import SOURCE_SCHEMA, TRANSACTION_SCHEMA, SourceInfo
from bridge.envelope.types import Converter, TypeMapping, map_type
from bridge.scylla.log_schema import deleted_column, deleted_elements_column, log_columns
from bridge.scylla.schema import Column, ColumnKind, TableSchema


@dataclass(frozen=True, slots=True)
class StructPlan:
    """The builders of one of `before` / `after` (same columns, three rules)."""

    schema: cs.ConnectSchema
    full: FullBuilder
    only_updated: OnlyUpdatedBuilder
    merged: MergedBuilder


@dataclass(frozen=True, slots=True)
class AdvancedPlan:
    table: TableSchema
    topic: str
    key_schema: cs.ConnectSchema | None  # the Kafka key's: `P.Key` with kafka-key, else None
    struct_key_schema: cs.ConnectSchema  # `P.Key`
    value_schema: cs.ConnectSchema
    key_names: tuple[str, ...]  # `P.Key` order
    key_builder: KeyBuilder  # log row values -> `P.Key` struct
    before: StructPlan
    after: StructPlan
    modified: ModifiedColumns  # delta row -> modified non-key columns
    headers: HeaderBuilder | None  # `P.Key` struct -> key headers, with kafka-headers
    payload_key_name: str | None  # the envelope's key field, with payload-key
    before_mode: IncludeMode
    after_mode: IncludeMode
    source: SourceInfo
    has_clustering: bool
    tombstones_on_delete: bool
    static_names: frozenset[str]  # static columns (a snapshot's static row has only these)
    regular_names: frozenset[str]
    dropped: DroppedChangePlan | None
    log_names: frozenset[str]  # every column a log row of this schema may carry

    @property
    def before_schema(self) -> cs.ConnectSchema:
        return self.before.schema

    @property
    def after_schema(self) -> cs.ConnectSchema:
        return self.after.schema


def _null_when_empty(convert: Converter) -> Converter:
    """A non-frozen collection with no element is null in Scylla (connector.md 2.5)."""

    def full_value(value: Any) -> Any:
        if isinstance(value, Sized) and len(value) == 0:
            return None
        return convert(value)

    return full_value


def _value_mapping(column: Column, prefix: SchemaNames) -> TypeMapping:
    if not column.type.is_multi_cell:
        return map_type(column.type, prefix)
    full = map_multi_cell(column.type, prefix, column.name).value
    if column.type.kind == "udt":
        return full  # all fields null -> null is the UDT converter's own rule
    return TypeMapping(full.schema, _null_when_empty(full.convert))


def _envelope_schema(
    prefix: SchemaNames, before: cs.ConnectSchema, after: cs.ConnectSchema, key: cs.ConnectSchema, key_name: str | None
) -> cs.ConnectSchema:
    fields = [
        cs.ConnectField("source", SOURCE_SCHEMA),
        cs.ConnectField("before", before),
        cs.ConnectField("after", after),
    ]
    if key_name is not None:
        fields.append(cs.ConnectField(key_name, key))
    fields += [
        cs.ConnectField("op", cs.OPTIONAL_STRING),
        cs.ConnectField("ts_ms", cs.OPTIONAL_INT64),
        cs.ConnectField("transaction", TRANSACTION_SCHEMA),
        cs.ConnectField("ts_us", cs.OPTIONAL_INT64),
        cs.ConnectField("ts_ns", cs.OPTIONAL_INT64),
    ]
    try:
        return cs.struct(prefix.of("Envelope"), fields, False)
    except ValueError as error:  # the payload key name clashes with an envelope field
        raise PlanError(f"cdc.include.primary-key.payload-key-name: {error}") from error


def _struct_plan(table: str, label: str, name: str, columns: list[tuple[StructColumn, cs.ConnectSchema]]) -> StructPlan:
    plain = [c for c, _ in columns]
    schema = cs.struct(name, [cs.ConnectField(c.name, s) for c, s in columns], True)
    return StructPlan(schema, compile_full(table, plain, label), compile_only_updated(table, plain, label),
                      compile_merged(table, plain, label))


def build_advanced_plan(table: TableSchema, settings: EnvelopeSettings) -> AdvancedPlan:
    """Everything needed to translate the change records of `table` in the advanced format;
    raises PlanError."""
    base = f"{settings.topic_prefix}.{table.keyspace}.{table.name}"
    prefix = SchemaNames(base, settings.schema_name_adjustment_mode)
    bare = SchemaNames("", settings.schema_name_adjustment_mode)
    placement = settings.cdc_include_primary_key_placement
    try:
        key_maps = {c.name: map_type(c.type, bare) for c in table.primary_key}
        value_maps = {c.name: _value_mapping(c, prefix) for c in table.value_columns}
    except ValueConversionError as error:
        raise PlanError(f"{table.qualified_name}: {error}") from error
    ordered = log_order(table.columns)
    key_columns = [c for c in ordered if c.kind is ColumnKind.PARTITION_KEY]
    key_columns += [c for c in ordered if c.kind is ColumnKind.CLUSTERING]
    key_schema = cs.struct(prefix.of("Key"), [cs.ConnectField(c.name, key_maps[c.name].schema) for c in key_columns],
                           False)

    def struct_columns(with_key: bool) -> list[tuple[StructColumn, cs.ConnectSchema]]:
        out: list[tuple[StructColumn, cs.ConnectSchema]] = []
        for column in ordered:
            if column.is_key:
                if with_key:
                    out.append((StructColumn(column.name, True), key_maps[column.name].schema))
                continue
            mapping = value_maps[column.name]
            elements = deleted_elements_column(column.name) if column.type.is_multi_cell else None
            out.append((StructColumn(column.name, False, mapping.convert, deleted_column(column.name), elements),
                        mapping.schema))
        return out

    name = table.qualified_name
    before = _struct_plan(name, "before", prefix.of("Before"), struct_columns(KeyPlacement.PAYLOAD_BEFORE in placement))
    after = _struct_plan(name, "after", prefix.of("After"), struct_columns(KeyPlacement.PAYLOAD_AFTER in placement))
    payload_key = settings.cdc_include_primary_key_payload_key_name if KeyPlacement.PAYLOAD_KEY in placement else None
    headers = None
    if KeyPlacement.KAFKA_HEADERS in placement:
        header_columns = [HeaderColumn(c.name, "pk." if c.kind is ColumnKind.PARTITION_KEY else "ck.",
                                       key_maps[c.name].schema) for c in ordered if c.is_key]
        headers = compile_headers(name, header_columns)
    dropped_topic = settings.dropped_changes_topic
    return AdvancedPlan(
        table=table,
        topic=base,
        key_schema=key_schema if KeyPlacement.KAFKA_KEY in placement else None,
        struct_key_schema=key_schema,
        value_schema=_envelope_schema(prefix, before.schema, after.schema, key_schema, payload_key),
        key_names=tuple(c.name for c in key_columns),
        key_builder=compile_key_builder(name, [KeyColumnPlan(c.name, key_maps[c.name].convert) for c in key_columns]),
        before=before,
        after=after,
        modified=compile_modified(name, [c for c, _ in struct_columns(False)]),
        headers=headers,
        payload_key_name=payload_key,
        before_mode=settings.cdc_include_before,
        after_mode=settings.cdc_include_after,
        source=SourceInfo(settings.topic_prefix, table.keyspace, table.name),
        has_clustering=bool(table.clustering_key),
        tombstones_on_delete=settings.tombstones_on_delete,
        static_names=frozenset(c.name for c in table.columns if c.kind is ColumnKind.STATIC),
        regular_names=frozenset(c.name for c in table.columns if c.kind is ColumnKind.REGULAR),
        dropped=dropped_change_plan(dropped_topic, prefix, table, key_schema) if dropped_topic else None,
        log_names=frozenset(name for name, _ in log_columns(table).all),
    )
