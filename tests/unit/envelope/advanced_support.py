"""Helpers of the advanced-format golden tests: plans under given modes and placements, and the
translation of hand-made records checked through every serializer (`support.Wire`).

The expectations restate the Java connector's integration tests (scylladb/scylla-cdc-source-
connector, `src/test/java/com/scylladb/cdc/debezium/connector/`) at commit 74d336e (HEAD) and
tag v2.0.0; each test names its file, and says where v2.0.0 differs."""

from __future__ import annotations

from typing import Any

from bridge.envelope.advanced_plan import AdvancedPlan, build_advanced_plan
from bridge.envelope.advanced_translate import translate_advanced
from bridge.envelope.records import Translation
from bridge.envelope.settings import EnvelopeSettings, IncludeMode, OutputFormat, key_placement
from bridge.scylla.model import LogRow
from bridge.scylla.schema import TableSchema
from tests.unit.envelope.support import NOW_MICROS, Wire, record

ALL_PLACEMENTS = "kafka-key,payload-after,payload-before,payload-key,kafka-headers"
DEFAULT_PLACEMENT = "kafka-key,payload-after,payload-before"
# The source block as the connector's tests compare it (dynamic fields stripped,
# ScyllaTypesIT.expectedSource).
SOURCE_KEYS = ("connector", "name", "snapshot", "db", "keyspace_name", "table_name")


def advanced_plan(table: TableSchema, before: str = "none", after: str = "none",
                  placement: str = DEFAULT_PLACEMENT, **settings: Any) -> AdvancedPlan:
    return build_advanced_plan(table, EnvelopeSettings(
        "P", cdc_output_format=OutputFormat.ADVANCED, cdc_include_before=IncludeMode(before),
        cdc_include_after=IncludeMode(after), cdc_include_primary_key_placement=key_placement(placement), **settings))


def run_advanced(plan: AdvancedPlan, *rows: LogRow) -> Translation:
    return translate_advanced(plan, record(plan.table, *rows), NOW_MICROS)


def events(plan: AdvancedPlan, *rows: LogRow) -> list[dict[str, Any]]:
    """Each Kafka record as {key, value (None: tombstone), headers}, JSON without schemas, after
    checking that JSON with schemas and Avro agree."""
    wire = Wire()
    out = []
    for kafka_record in run_advanced(plan, *rows).records:
        key, value = wire.check(kafka_record)
        out.append({"key": key, "value": value, "headers": dict(kafka_record.headers)})
    return out


def data(event: dict[str, Any]) -> dict[str, Any]:
    """The value without its dynamic fields, as the connector's tests compare it."""
    value = dict(event["value"])
    value["source"] = {k: v for k, v in value["source"].items() if k in SOURCE_KEYS}
    for name in ("ts_ms", "ts_us", "ts_ns", "transaction"):
        value.pop(name)
    return value
