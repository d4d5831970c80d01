"""Builders for hand-made change records and a checker that runs every serializer on a record.

`Wire.check(record)` writes the record with JSON (schemas off and on) and Avro, verifies that the
three agree (the schemas-on payload equals the schemas-off bytes, the schema is the plan's, the
Avro body decodes to the Connect value), and returns the parsed schemas-off JSON for goldens.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

import fastavro
import orjson

from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.avro_serializer import AvroSerializer
from bridge.envelope.connect_schema import ConnectSchema, json_schema
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.names import NameAdjustment, adjust_field_name
from bridge.envelope.plan import TablePlan, build_plan
from bridge.envelope.records import KafkaRecord, Translation
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.translate import translate
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.log_schema import deleted_column, deleted_elements_column
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.schema import CdcOptions, Column, ColumnKind, CqlType, TableSchema, parse_cql_type
from bridge.scylla.stream_id import StreamId
from bridge_devstack.testing import InProcessRegistry

STREAM = StreamId.build(-4_611_686_018_427_387_904, 12345, 7)
WRITE_MICROS = 1_718_022_896_789_123  # 2024-06-10T12:34:56.789123Z
NOW_MICROS = 1_718_022_902_001_000
# The envelope's fields in the Java connector's order (connector.md 2.3).
ENVELOPE_FIELDS = ["source", "before", "after", "op", "ts_ms", "transaction", "ts_us", "ts_ns"]
TIME = timeuuid_for(WRITE_MICROS, low=0x8000_0123_4567_89AB)


def d(column: str) -> str:
    """`cdc$deleted_<column>`."""
    return deleted_column(column)


def de(column: str) -> str:
    """`cdc$deleted_elements_<column>`."""
    return deleted_elements_column(column)


def make_table(
    partition: Sequence[tuple[str, str]],
    clustering: Sequence[tuple[str, str]] = (),
    regular: Sequence[tuple[str, str]] = (),
    static: Sequence[tuple[str, str]] = (),
    udts: dict[str, CqlType] | None = None,
    keyspace: str = "ks",
    name: str = "t",
    cdc: CdcOptions | None = None,
) -> TableSchema:
    columns: list[Column] = []
    for kind, spec in (
        (ColumnKind.PARTITION_KEY, partition),
        (ColumnKind.CLUSTERING, clustering),
        (ColumnKind.STATIC, static),
        (ColumnKind.REGULAR, regular),
    ):
        columns += [Column(n, parse_cql_type(t, udts), kind) for n, t in spec]
    return TableSchema(keyspace, name, tuple(columns), cdc or CdcOptions(enabled=True))


def row(op: Operation, seq: int = 0, ttl: int | None = None, **values: Any) -> LogRow:
    return LogRow(STREAM, TIME, seq, op, ttl, False, values)


def row_with(op: Operation, values: dict[str, Any], seq: int = 0, ttl: int | None = None) -> LogRow:
    """A row whose columns include `cdc$...` names (not Python identifiers)."""
    return LogRow(STREAM, TIME, seq, op, ttl, False, values)


def record(table: TableSchema, *rows: LogRow) -> ChangeRecord:
    numbered = tuple(
        LogRow(r.stream_id, r.time, seq, r.operation, r.ttl, seq == len(rows) - 1, r.values)
        for seq, r in enumerate(rows)
    )
    return ChangeRecord(table.keyspace, table.name, numbered)


def plan_for(table: TableSchema, **settings: Any) -> TablePlan:
    return build_plan(table, EnvelopeSettings("P", **settings))


def run(plan: TablePlan, *rows: LogRow) -> Translation:
    return translate(plan, record(plan.table, *rows), NOW_MICROS)


def _without_logical_types(avro: Any) -> Any:
    if isinstance(avro, dict):
        return {k: _without_logical_types(v) for k, v in avro.items() if k != "logicalType"}
    if isinstance(avro, list):
        return [_without_logical_types(v) for v in avro]
    return avro


def avro_form(value: Any, schema: ConnectSchema, mode: NameAdjustment = NameAdjustment.AVRO) -> Any:
    """A Connect value with its struct members under their Avro field names (what an Avro reader
    of the registered schema sees; `field.name.adjustment.mode` = `mode`)."""
    if value is None:
        return None
    if schema.type == "struct":
        return {adjust_field_name(f.name, mode): avro_form(value[f.name], f.schema, mode) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        return [avro_form(item, schema.items, mode) for item in value]
    return value


def fastavro_bytes(value: Any, schema: ConnectSchema) -> bytes:
    """The reference encoding: fastavro's writer on the schema's Avro form."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(avro_schema(schema)), avro_form(value, schema))
    return out.getvalue()


def avro_decode(body: bytes, schema: ConnectSchema) -> Any:
    """Decode an Avro body (no framing) with the schema's Avro form, logical types left as ints."""
    parsed = fastavro.parse_schema(_without_logical_types(avro_schema(schema)))
    return fastavro.schemaless_reader(io.BytesIO(body), parsed, None)


class Wire:
    """Every serializer, for cross-checking one record at a time."""

    def __init__(self) -> None:
        self.json_off = JsonSerializer(schemas_enable=False)
        self.json_on = JsonSerializer(schemas_enable=True)
        self.registry = InProcessRegistry()
        self.avro_key = AvroSerializer(self.registry, is_key=True)
        self.avro_value = AvroSerializer(self.registry, is_key=False)

    def _side(self, topic: str, schema: ConnectSchema | None, value: Any, is_key: bool) -> Any:
        off = self.json_off.serialize(topic, schema, value)
        on = self.json_on.serialize(topic, schema, value)
        avro_side = self.avro_key if is_key else self.avro_value
        if schema is not None:
            avro_side.register(topic, schema)  # what RecordSerializer.prepare does when a plan is built
        avro = avro_side.serialize(topic, schema, value)
        if value is None:
            assert off is None and on is None and avro is None
            return None
        assert schema is not None and off is not None and on is not None and avro is not None
        assert on == b'{"schema":' + orjson.dumps(json_schema(schema)) + b',"payload":' + off + b"}"
        assert avro[0] == 0
        assert avro[5:] == fastavro_bytes(value, schema)  # the compiled encoder writes what fastavro writes
        assert avro_decode(avro[5:], schema) == avro_form(value, schema)
        return json.loads(off)

    def check(self, record: KafkaRecord) -> tuple[Any, Any]:
        """(key, value) as JSON without schemas, after checking all serializers agree."""
        key = self._side(record.topic, record.key_schema, record.key, is_key=True)
        value = self._side(record.topic, record.value_schema, record.value, is_key=False)
        return key, value

    def values(self, translation: Translation) -> list[Any]:
        """The JSON values of every record (None for tombstones)."""
        return [self.check(r)[1] for r in translation.records]
