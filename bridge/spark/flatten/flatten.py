"""ExtractNewRecordState + ScyllaExtractNewRecordState on DataFrames (reference/ecosystem.md 2.2,
connector.md 3.1), pure DataFrame -> DataFrame functions.

Per input record (Debezium 2.5+ order of steps):
- `add.headers` are added to envelopes and to Debezium tombstones (a tombstone gets only `op`=d);
- a tombstone (null value) is kept only in `rewrite-with-tombstone` (legacy: drop.tombstones=false);
- a record that is not an envelope (the dropped-changes side topic, anything else) passes unchanged;
- create/update: the value is `after`; rewrite modes append `__deleted`="false"; then `add.fields`;
- delete (`after` null): `drop` drops it, `tombstone` keeps the key with a null value (JSON with
  schemas: `{"schema":<after schema>,"payload":null}`; without: the bytes `null`),
  `delete-to-tombstone` gives a real tombstone, the rewrite modes give `before` + `__deleted`="true"
  + `add.fields`;
- legacy cells (`{"value": v}` structs named `*.Cell`) become plain values, so "not touched" and
  "set to null" both read null (the SMT's known loss; the mirror keeps them apart).

Output columns: `topic` (the source topic), `partition`, `offset`, `key` (unchanged bytes),
`value` (string or null), `headers`, plus `flat` (the flattened struct, for Delta / file sinks).
"""

from __future__ import annotations

from typing import Any

import orjson
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.decode import Group
from bridge.spark.core.output_schema import flattened_schema_json, optional_after_schema_json
from bridge.spark.core.shape import ELEMENTS_SUFFIX, TableShape, conform
from bridge.spark.core.smt_options import DELETED_FIELD, DeleteMode, FieldReference, SmtOptions

HEADERS_TYPE = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value",
                                                                                             T.BinaryType())]))
JSON_OPTIONS = {"ignoreNullFields": "false"}


def _headers(existing: Column, added: list[Column]) -> Column:
    base = F.coalesce(existing, F.array().cast(HEADERS_TYPE))
    return F.concat(base, F.array(*added).cast(HEADERS_TYPE)) if added else base


def _header(name: str, value: Column) -> Column:
    # Connect's SimpleHeaderConverter: strings as UTF-8, numbers and booleans as their text.
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def _reference(env_type: T.StructType, ref: FieldReference) -> Column | None:
    """The envelope value `ref` points at, or None when the schema has no such field (skipped)."""
    if ref.struct is None:
        return F.col("env")[ref.field] if ref.field in env_type.fieldNames() else None
    if ref.struct not in env_type.fieldNames():
        return None
    parent = env_type[ref.struct].dataType
    if not isinstance(parent, T.StructType) or ref.field not in parent.fieldNames():
        return None
    return F.col("env")[ref.struct][ref.field]


def flatten(group: Group, options: SmtOptions, schemas: bool) -> DataFrame:
    """The flattened records of one group; `schemas`: write JSON with its Connect schema."""
    if group.kind == "tombstone":
        return _tombstones(group, options)
    if group.kind != "envelope":
        return group.frame.select("topic", "partition", "offset", "key", F.col("value").cast("string").alias("value"),
                                  "headers", F.lit(None).alias("flat"))
    assert group.env_type is not None and group.shape is not None
    env_type, shape = group.env_type, group.shape
    env = F.col("env")
    after_missing = env["after"].isNull() if "after" in env_type.fieldNames() else F.lit(True)
    before_missing = env["before"].isNull() if "before" in env_type.fieldNames() else F.lit(True)
    is_delete = after_missing & ~before_missing
    truncate = after_missing & before_missing

    def side(name: str) -> Column:
        side_type = env_type[name].dataType if name in env_type.fieldNames() else None
        fields = []
        for field in shape.row_type.fields:
            present = isinstance(side_type, T.StructType) and field.name in side_type.fieldNames()
            if not present:
                fields.append(F.lit(None).cast(_output_type(shape, field, options)).alias(field.name))
                continue
            assert isinstance(side_type, T.StructType)
            source = side_type[field.name].dataType
            value = env[name][field.name]
            if _unwraps(shape, field.name, options):
                inner = source["value"].dataType if isinstance(source, T.StructType) and _is_cell_type(source) \
                    else T.NullType()
                value = value["value"] if _is_cell_type(source) else F.lit(None)
                fields.append(conform(value, inner, shape.column(field.name).spark_type).alias(field.name))
            else:
                fields.append(conform(value, source, field.dataType).alias(field.name))
        return F.struct(*fields)

    added = [(ref.new_name, col) for ref in options.add_fields if (col := _reference(env_type, ref)) is not None]
    # Staged selects: each expression is built once and referenced by name, so the plan stays
    # linear in the number of columns.
    staged = group.frame.select(
        "topic", "partition", "offset", "key", "headers", "env", is_delete.alias("_delete"),
        (~truncate & (~is_delete | F.lit(options.delete_mode is not DeleteMode.DROP))).alias("_kept"),
        F.when(is_delete, side("before")).otherwise(side("after")).alias("_row"),
    ).where(F.col("_kept"))
    row, deleting = F.col("_row"), F.col("_delete")
    extra = [F.when(deleting, F.lit("true")).otherwise(F.lit("false")).alias(DELETED_FIELD)] if options.rewrite else []
    flat = F.struct(*[row[f.name].alias(f.name) for f in shape.row_type.fields], *extra,
                    *[col.alias(name) for name, col in added])
    headers = _headers(F.col("headers"), [_header(ref.new_name, col) for ref in options.add_headers
                                          if (col := _reference(env_type, ref)) is not None])
    with_flat = staged.select("topic", "partition", "offset", "key", "_delete", headers.alias("headers"),
                              flat.alias("flat"))
    payload = F.to_json(F.col("flat"), JSON_OPTIONS)
    mode = options.delete_mode
    null_value: Column = F.lit(None).cast("string")
    if mode is DeleteMode.TOMBSTONE:
        null_value = F.lit("null")
        if schemas and group.connect_schema is not None:
            null_value = F.lit('{"schema":' + optional_after_schema_json(group.connect_schema) + ',"payload":null}')
    if schemas and group.connect_schema is not None:
        after_json = flattened_schema_json(group.connect_schema, "after", options)
        before_json = flattened_schema_json(group.connect_schema, "before", options)
        schema_text = F.when(F.col("_delete"), F.lit(before_json)).otherwise(F.lit(after_json))
        payload = F.concat(F.lit('{"schema":'), schema_text, F.lit(',"payload":'), payload, F.lit("}"))
    value_is_null = F.col("_delete") & F.lit(not options.rewrite)
    return with_flat.select(
        "topic", "partition", "offset", "key", F.when(value_is_null, null_value).otherwise(payload).alias("value"),
        "headers", F.when(value_is_null, F.lit(None)).otherwise(F.col("flat")).alias("flat"))


def _is_cell_type(data_type: T.DataType) -> bool:
    return isinstance(data_type, T.StructType) and data_type.fieldNames() == ["value"]


def _unwraps(shape: TableShape, name: str, options: SmtOptions) -> bool:
    if not options.unwrap_cells or name.endswith(ELEMENTS_SUFFIX):
        return False
    return not shape.column(name).is_key


def _output_type(shape: TableShape, field: T.StructField, options: SmtOptions) -> T.DataType:
    return shape.column(field.name).spark_type if _unwraps(shape, field.name, options) else field.dataType


def _tombstones(group: Group, options: SmtOptions) -> DataFrame:
    frame = group.frame
    if not options.keep_tombstones:
        frame = frame.limit(0)
    added = [_header(ref.new_name, F.lit("d")) for ref in options.add_headers
             if ref.field == "op" and ref.struct is None]
    return frame.select("topic", "partition", "offset", "key", F.lit(None).cast("string").alias("value"),
                        _headers(F.col("headers"), added).alias("headers"), F.lit(None).alias("flat"))


def output_topic(rule: str, topic: str) -> str:
    """The flattened topic of `topic` by the naming rule (`{topic}`, `{prefix}`, `{keyspace}`, `{table}`)."""
    parts = topic.rsplit(".", 2)
    prefix, keyspace, table = parts if len(parts) == 3 else ("", "", topic)
    return rule.format(topic=topic, prefix=prefix, keyspace=keyspace, table=table)


def describe(value: Any) -> str:
    """Compact JSON text (debugging and golden tests)."""
    return orjson.dumps(value).decode()
