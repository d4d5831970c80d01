"""The mirror's events from advanced-format envelopes (`cdc.output.format=advanced` with
`cdc.include.after=full`; bridge.spark.core.cdc_format refuses the other modes before the job starts).

An advanced envelope carries plain values, and its `after` is the post-image: the whole row as
the change left it. So a `c`, `u` or `r` sets every column `after` holds (collections and UDTs
whole), `d` deletes the row, and the fold (bridge.spark.fold.events) does the rest as for legacy
envelopes: order by (`source.ts_us`, rank, offset), skip what is at or before a row's stored
position, row marker on `c` / `r`.

The schema does not mark the key columns of `after` / `before` (they are there only with the
placements `payload-after` / `payload-before`), and a delete's `before` is null without a
pre-image, so the key comes from where the placement puts it whole: the Kafka key (`kafka-key`,
parsed in the value's format) or the envelope's `<payload-key-name>` struct (`payload-key`). Each
key column is the first non-null of the Kafka key, the payload key, `after` and `before`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.envelope.settings import KeyPlacement
from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.decode import Group, ValueFormat
from bridge.spark.core.errors import BadEnvelopeError
from bridge.spark.core.output_schema import field_of
from bridge.spark.core.shape import ColumnShape, avro_to_connect, conform, plain_shape_from_connect
from bridge.spark.fold.events import data_event
from bridge.spark.fold.frames import MirrorColumns, from_connect


@dataclass(frozen=True)
class GroupKey:
    """Where the key of one group's envelopes is, and its columns."""

    columns: tuple[ColumnShape, ...]  # is_key set, in the key struct's order
    kafka_key: tuple[Column, T.StructType] | None  # the parsed Kafka key and its type
    payload_key: T.StructType | None  # the type of env[<payload-key-name>], when the envelope has one


@dataclass(frozen=True)
class KafkaKey:
    columns: tuple[ColumnShape, ...]
    parsed: Column  # every record's key as a struct
    key_type: T.StructType


def avro_key_text(registry_url: str) -> Callable[[bytes | None], str | None]:
    """One framed Avro key to the JSON text of its payload (in the tasks; schemas cached per id)."""
    from bridge.spark.core.avro import AvroDecoder, decoder_for

    registry = AvroDecoder(registry_url)
    decoders: dict[int, Callable[[bytes | None], str | None]] = {}

    def decode(data: bytes | None) -> str | None:
        if not data:
            return None
        schema_id = int.from_bytes(bytes(data)[1:5], "big")
        if schema_id not in decoders:
            decoders[schema_id] = decoder_for(registry.schema_text(schema_id))
        return decoders[schema_id](data)

    return decode


class AdvancedEvents:
    """The key and the events of advanced-format groups (one per mirror job)."""

    def __init__(self, cdc: CdcFormat, value_format: ValueFormat, registry_url: str | None) -> None:
        self.cdc, self.value_format, self.registry_url = cdc, value_format, registry_url

    def key_of(self, group: Group) -> GroupKey:
        """The group's key columns (one Spark job: its first Kafka key)."""
        assert group.env_type is not None and group.shape is not None
        payload_key = self._payload_key_type(group)
        kafka_key = self._kafka_key(group) if KeyPlacement.KAFKA_KEY in self.cdc.placement else None
        if kafka_key is not None:
            shapes = kafka_key.columns
        elif payload_key is not None:
            shapes = self._payload_key_shapes(group, payload_key)
        else:
            raise BadEnvelopeError(f"topic {group.topic}: advanced envelopes whose key is neither in the Kafka key "
                                   f"nor in a `{self.cdc.payload_key_name}` field (cdc.include.primary-key.placement "
                                   "needs kafka-key or payload-key)")
        by_name = {c.name: c for c in group.shape.columns}
        columns = tuple(_as_key(by_name.get(c.name, c)) for c in shapes)
        parsed = (kafka_key.parsed, kafka_key.key_type) if kafka_key is not None else None
        return GroupKey(columns, parsed, payload_key)

    def _payload_key_type(self, group: Group) -> T.StructType | None:
        assert group.env_type is not None
        name = self.cdc.payload_key_name
        if KeyPlacement.PAYLOAD_KEY not in self.cdc.placement or name not in group.env_type.fieldNames():
            return None
        found = group.env_type[name].dataType
        return found if isinstance(found, T.StructType) else None

    def _payload_key_shapes(self, group: Group, key_type: T.StructType) -> tuple[ColumnShape, ...]:
        schema = field_of(group.connect_schema, self.cdc.payload_key_name) if group.connect_schema else None
        if schema is not None:
            return plain_shape_from_connect(schema).columns
        return tuple(ColumnShape(f.name, True, f.dataType) for f in key_type.fields)

    def _kafka_key(self, group: Group) -> KafkaKey | None:
        """The key columns from the group's first Kafka key, and every record's key parsed."""
        first = group.frame.where(F.col("key").isNotNull()).select("key").first()
        if first is None:
            return None
        raw = bytes(first["key"])
        text = F.col("key").cast("string")
        if self.value_format is ValueFormat.JSON:  # inferred, as the values are (docs/spark.md)
            keys = group.frame.where(F.col("key").isNotNull()).select(text.alias("value"))
            key_type = group.frame.sparkSession.read.json(keys, mode="FAILFAST").schema
            return KafkaKey(tuple(ColumnShape(f.name, True, f.dataType) for f in key_type.fields),
                            F.from_json(text, key_type), key_type)
        if self.value_format is ValueFormat.JSON_SCHEMAS:
            schema = _loads(raw, group).get("schema")
            if not isinstance(schema, dict):
                raise BadEnvelopeError(f"topic {group.topic}: a Kafka key without its schema (key.converter "
                                       "schemas.enable=false? the mirror reads keys in the value's format)")
            shape = plain_shape_from_connect(schema)
            parsed = F.from_json(text, T.StructType([T.StructField("payload", shape.row_type)]))["payload"]
            return KafkaKey(shape.columns, parsed, shape.row_type)
        assert self.registry_url is not None
        from bridge.spark.core.avro import AvroDecoder

        if len(raw) < 5 or raw[0] != 0:
            raise BadEnvelopeError(f"topic {group.topic}: a Kafka key not in the Confluent Avro framing")
        schema_text = AvroDecoder(self.registry_url).schema_text(int.from_bytes(raw[1:5], "big"))
        shape = plain_shape_from_connect(avro_to_connect(json.loads(schema_text)))
        key_json = F.udf(avro_key_text(self.registry_url), "string")(F.col("key"))
        return KafkaKey(shape.columns, F.from_json(key_json, shape.row_type), shape.row_type)

    def columns_of(self, group: Group, key: GroupKey) -> tuple[ColumnShape, ...]:
        """The table's columns this group knows: the key's, then `after`'s / `before`'s others."""
        assert group.shape is not None
        names = {c.name for c in key.columns}
        return key.columns + tuple(c for c in group.shape.columns if c.name not in names)

    def events(self, group: Group, columns: MirrorColumns, key: GroupKey) -> DataFrame:
        """(key columns..., x) of each change: `c` / `u` / `r` set every column `after` holds."""
        env, env_type = F.col("env"), group.env_type
        assert env_type is not None
        sources: list[tuple[Column, T.DataType]] = []
        if key.kafka_key is not None:
            sources.append(key.kafka_key)
        if key.payload_key is not None:
            sources.append((env[self.cdc.payload_key_name], key.payload_key))
        sources += [(env[side], env_type[side].dataType) for side in ("after", "before")
                    if side in env_type.fieldNames()]
        keys = []
        for column in columns.keys:
            found = [(struct[column.name], struct_type[column.name].dataType) for struct, struct_type in sources
                     if isinstance(struct_type, T.StructType) and column.name in struct_type.fieldNames()]
            value = F.coalesce(*[conform(c, t, column.spark_type) for c, t in found]) if found else \
                F.lit(None).cast(column.spark_type)
            keys.append(from_connect(column, value))
        after = env["after"]
        after_type = env_type["after"].dataType if "after" in env_type.fieldNames() else None
        cells: list[tuple[Column | None, Column | None, Column | None]] = []
        for column in columns.values:
            if isinstance(after_type, T.StructType) and column.name in after_type.fieldNames():
                value = conform(after[column.name], after_type[column.name].dataType, column.spark_type)
                cells.append((after, from_connect(column, value), None))
            else:
                cells.append((None, None, None))
        op = env["op"]
        static_row = reduce(lambda a, b: a | b, [k.isNull() for k in keys], F.lit(False))
        event = data_event(columns.values, env["source"]["ts_us"], F.col("offset"), op, static_row, cells)
        named = [k.alias(c.name) for k, c in zip(keys, columns.keys, strict=True)]
        return group.frame.where(op.isin("c", "u", "d", "r")).select(*named, event.alias("x"))


def _as_key(column: ColumnShape) -> ColumnShape:
    return ColumnShape(column.name, True, column.spark_type, column.logical)


def _loads(raw: bytes, group: Group) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except ValueError:
        raise BadEnvelopeError(f"topic {group.topic}: a Kafka key that is not JSON: {raw[:100]!r}") from None
    if not isinstance(found, dict):
        raise BadEnvelopeError(f"topic {group.topic}: a Kafka key that is not a JSON object: {raw[:100]!r}")
    return found
