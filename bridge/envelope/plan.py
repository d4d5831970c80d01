"""Per-table translation plans: every schema, name and converter, built once per table schema.

Names follow the Java connector's legacy format, with `P` = `<topic.prefix>.<keyspace>.<table>`
(each struct name passed whole through Debezium's schema-name adjuster, `schema.name.adjustment.mode`):

- topic `<topic.prefix>.<keyspace>.<table>` (not adjusted);
- key struct `P.Key`; row structs `P.Before` / `P.After` (optional); envelope `P.Envelope`;
- cells `P.<column>.Cell` (optional struct, one field `value`); element changes of non-frozen
  collections/UDTs in the companion field `<column>__elements` (`P.<column>.Elements`).

Column order: the Java connector lists columns as the CDC log table returns them, that is the
base table's columns in name order (the log table makes them all regular columns, and Scylla
orders regular columns by name), key and value columns mixed. Keys therefore serialize to the same
bytes as the Java connector's, so they hash to the same partitions. Key fields are optional
schemas, as in the connector.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.envelope import connect_schema as cs
from bridge.envelope.elements import ELEMENTS_SUFFIX, map_multi_cell
from bridge.envelope.errors import PlanError, ValueConversionError
from bridge.envelope.names import SchemaNames
from bridge.envelope.row_code import (
    ColumnPlan,
    ImageBuilder,
    KeyBuilder,
    KeyColumnPlan,
    RowBuilder,
    ValueColumnPlan,
    compile_key_builder,
    compile_row_builder,
)
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.source_info import SOURCE_SCHEMA, TRANSACTION_SCHEMA, SourceInfo
from bridge.envelope.types import map_type
from bridge.scylla.log_schema import deleted_column, deleted_elements_column, log_columns
from bridge.scylla.schema import Column, ColumnKind, TableSchema


@dataclass(frozen=True, slots=True)
class DroppedChangePlan:
    """Schemas of the opt-in side topic for range deletes and clustered partition deletes."""

    topic: str
    key_schema: cs.ConnectSchema  # the table's key struct (partition key set, clustering null)
    value_schema: cs.ConnectSchema
    clustering_builder: KeyBuilder  # a range bound's log row -> its clustering struct


@dataclass(frozen=True, slots=True)
class TablePlan:
    table: TableSchema
    topic: str
    key_schema: cs.ConnectSchema
    before_schema: cs.ConnectSchema
    after_schema: cs.ConnectSchema
    value_schema: cs.ConnectSchema
    key_names: tuple[str, ...]  # key struct order
    key_builder: KeyBuilder  # log row values -> key struct (generated, bridge.envelope.row_code)
    clustering_names: tuple[str, ...]
    row_columns: tuple[ColumnPlan, ...]  # row struct order (companion fields follow their column)
    delta_builder: RowBuilder  # delta row -> row struct
    pre_image_builder: ImageBuilder  # pre-image row -> `before`
    post_image_builder: ImageBuilder  # post-image row -> `after`
    source: SourceInfo
    has_clustering: bool
    tombstones_on_delete: bool
    preimages: bool
    postimages: bool
    dropped: DroppedChangePlan | None
    log_names: frozenset[str]  # every column a log row of this schema may carry


def log_order(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The order in which the CDC log table returns the base table's columns (by name)."""
    return tuple(sorted(columns, key=lambda c: c.name.encode()))


def _key_plan(column: Column, prefix: SchemaNames) -> tuple[KeyColumnPlan, cs.ConnectSchema]:
    mapping = map_type(column.type, prefix)
    return KeyColumnPlan(column.name, mapping.convert), mapping.schema


def _value_plan(column: Column, prefix: SchemaNames) -> tuple[ValueColumnPlan, list[cs.ConnectField]]:
    cell_name = prefix.of(f"{column.name}.Cell")
    if not column.type.is_multi_cell:
        mapping = map_type(column.type, prefix)
        cell = cs.struct(cell_name, [cs.ConnectField("value", mapping.schema)], True)
        plan = ValueColumnPlan(
            column.name, deleted_column(column.name), mapping.convert, column.kind is ColumnKind.STATIC
        )
        return plan, [cs.ConnectField(column.name, cell)]
    multi = map_multi_cell(column.type, prefix, column.name)
    cell = cs.struct(cell_name, [cs.ConnectField("value", multi.value.schema)], True)
    companion = column.name + ELEMENTS_SUFFIX
    plan = ValueColumnPlan(
        column.name,
        deleted_column(column.name),
        multi.value.convert,
        column.kind is ColumnKind.STATIC,
        multi,
        companion,
        deleted_elements_column(column.name),
    )
    return plan, [cs.ConnectField(column.name, cell), cs.ConnectField(companion, multi.elements_schema)]


def _check_names(table: TableSchema) -> None:
    names = {c.name for c in table.columns}
    for column in table.value_columns:
        companion = column.name + ELEMENTS_SUFFIX
        if column.type.is_multi_cell and companion in names:
            raise PlanError(
                f"{table.qualified_name}: column {companion!r} clashes with the element-change field "
                f"of non-frozen column {column.name!r}"
            )


def _envelope_schema(prefix: SchemaNames, before: cs.ConnectSchema, after: cs.ConnectSchema) -> cs.ConnectSchema:
    fields = [
        cs.ConnectField("source", SOURCE_SCHEMA),
        cs.ConnectField("before", before),
        cs.ConnectField("after", after),
        cs.ConnectField("op", cs.OPTIONAL_STRING),
        cs.ConnectField("ts_ms", cs.OPTIONAL_INT64),
        cs.ConnectField("transaction", TRANSACTION_SCHEMA),
        cs.ConnectField("ts_us", cs.OPTIONAL_INT64),
        cs.ConnectField("ts_ns", cs.OPTIONAL_INT64),
    ]
    return cs.struct(prefix.of("Envelope"), fields, False)


def dropped_change_plan(
    topic: str, prefix: SchemaNames, table: TableSchema, key_schema: cs.ConnectSchema
) -> DroppedChangePlan:
    clustering = [_key_plan(c, prefix) for c in table.clustering_key]
    bound = cs.struct(
        prefix.of("Clustering"),
        [cs.ConnectField(p.name, schema) for p, schema in clustering],
        True,
    )
    optional_bool = cs.primitive(cs.BOOLEAN)
    fields = [
        cs.ConnectField("source", SOURCE_SCHEMA),
        cs.ConnectField("kind", cs.REQUIRED_STRING),
        cs.ConnectField("start", bound),
        cs.ConnectField("start_inclusive", optional_bool),
        cs.ConnectField("end", bound),
        cs.ConnectField("end_inclusive", optional_bool),
        cs.ConnectField("ts_ms", cs.OPTIONAL_INT64),
    ]
    value = cs.struct(prefix.of("DroppedChange"), fields, False)
    builder = compile_key_builder(f"{table.qualified_name} clustering", [p for p, _ in clustering])
    return DroppedChangePlan(topic, key_schema, value, builder)


def build_plan(table: TableSchema, settings: EnvelopeSettings) -> TablePlan:
    """Everything needed to translate the change records of `table`; raises PlanError."""
    _check_names(table)
    base = f"{settings.topic_prefix}.{table.keyspace}.{table.name}"
    prefix = SchemaNames(base, settings.schema_name_adjustment_mode)
    try:
        key_parts = {c.name: _key_plan(c, prefix) for c in table.primary_key}
        value_parts = {c.name: _value_plan(c, prefix) for c in table.value_columns}
    except ValueConversionError as error:
        raise PlanError(f"{table.qualified_name}: {error}") from error
    ordered = log_order(table.columns)
    key_columns = [key_parts[c.name][0] for c in ordered if c.is_key]
    key_schema = cs.struct(
        prefix.of("Key"),
        [cs.ConnectField(c.name, key_parts[c.name][1]) for c in ordered if c.is_key],
        False,
    )
    row_fields: list[cs.ConnectField] = []
    row_columns: list[ColumnPlan] = []
    for column in ordered:
        if column.is_key:
            row_columns.append(key_parts[column.name][0])
            row_fields.append(cs.ConnectField(column.name, key_parts[column.name][1]))
        else:
            row_columns.append(value_parts[column.name][0])
            row_fields.extend(value_parts[column.name][1])
    before = cs.struct(prefix.of("Before"), row_fields, True)
    after = cs.struct(prefix.of("After"), row_fields, True)
    dropped_topic = settings.dropped_changes_topic
    return TablePlan(
        table=table,
        topic=base,
        key_schema=key_schema,
        before_schema=before,
        after_schema=after,
        value_schema=_envelope_schema(prefix, before, after),
        key_names=tuple(c.name for c in key_columns),
        key_builder=compile_key_builder(table.qualified_name, key_columns),
        clustering_names=tuple(c.name for c in table.clustering_key),
        row_columns=tuple(row_columns),
        delta_builder=compile_row_builder(table.qualified_name, row_columns, "delta"),
        pre_image_builder=compile_row_builder(table.qualified_name, row_columns, "pre"),
        post_image_builder=compile_row_builder(table.qualified_name, row_columns, "post"),
        source=SourceInfo(settings.topic_prefix, table.keyspace, table.name),
        has_clustering=bool(table.clustering_key),
        tombstones_on_delete=settings.tombstones_on_delete,
        preimages=settings.experimental_preimages_enabled,
        postimages=settings.experimental_postimages_enabled,
        dropped=dropped_change_plan(dropped_topic, prefix, table, key_schema) if dropped_topic else None,
        log_names=frozenset(name for name, _ in log_columns(table).all),
    )
