"""flatten and mirror on advanced-format topics (issue 25), read by Spark's Kafka source from a real
Kafka: records built by hand as reference/connector.md 2.2-2.9 describes them
(tests/unit/spark/advanced_envelopes.py), written by the worker's own serializers as JSON without
and with schemas and as Avro through the registry, with `cdc.include.after=full` and
`cdc.include.before=none`.

- flatten (the Spark-expression path, and the tasks' per-record path for JSON with schemas and
  Avro): each `c` / `u` / `r` is its post-image, plain values; the delete (no pre-image: `before`
  and `after` null) is dropped as ExtractNewRecordState drops a truncate; its Kafka tombstone
  passes only with `rewrite-with-tombstone`.
- mirror (`MirrorWriter` on the topic's records in two micro-batches): the Delta table equals the
  table the history leaves, whether the key comes from the Kafka key or from the payload key;
  and micro-batches numbered from 0 again by a new checkpoint are written, not skipped.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from bridge.envelope import EnvelopeSettings
from bridge.envelope.settings import ConverterKind
from bridge.kafka.registry import registry_client
from bridge_devstack.stack.layout import Endpoints
from tests.unit.spark.advanced_envelopes import (
    FULL_AFTER_STATE,
    KEY_COLUMNS,
    VALUE_COLUMNS,
    AdvancedTable,
    full_after_history,
)

FORMATS = ("json", "json-schemas", "avro")


def produce(stack: Endpoints, records: list[Any], prefix: str, value_format: str) -> None:
    """`records` (KafkaRecords) through the worker's own serializers into Kafka: JSON without or
    with schemas, or Avro through the registry."""
    from bridge.envelope import build_record_serializer

    avro = value_format == "avro"
    url = stack.schema_registry_url if avro else None
    kind = ConverterKind.AVRO if avro else ConverterKind.JSON
    schemas = value_format != "json"
    settings = EnvelopeSettings(topic_prefix=prefix, key_converter=kind, value_converter=kind,
                                key_converter_schemas_enable=schemas, value_converter_schemas_enable=schemas,
                                key_converter_schema_registry_url=url, value_converter_schema_registry_url=url)
    serializer = build_record_serializer(settings, registry_client)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    failures: list[Any] = []
    for record in records:
        if avro:  # the worker registers a plan's schemas when it builds it; these are built by hand
            if record.key_schema is not None:
                serializer.key.prepare(record.topic, record.key_schema)
            if record.value_schema is not None:
                serializer.value.prepare(record.topic, record.value_schema)
        key, value = serializer.serialize(record)
        producer.produce(record.topic, key=key, value=value, on_delivery=lambda err, _m: err and failures.append(err))
    assert producer.flush(30) == 0 and not failures, failures


def _produce(stack: Endpoints, table: AdvancedTable, value_format: str) -> None:
    produce(stack, full_after_history(table), table.prefix, value_format)


def _read(spark: Any, stack: Endpoints, topic: str) -> Any:
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", stack.kafka_bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true")
            .option("kafka.isolation.level", "read_committed").load())


def _payload(value: str | None, schemas: bool) -> Any:
    if value is None:
        return "tombstone"
    parsed = orjson.loads(value)
    return parsed["payload"] if schemas else parsed


EXPECTED_FLAT = [  # the post-images of c, u, c, (d dropped), c, r, u, in offset order
    {"pk": 1, "ck": 1, "v": 5, "t": "x", "s": [1, 2], "m": [{"key": 1, "value": "a"}], "u": {"a": 1, "b": "q"},
     "d": 19884},
    {"pk": 1, "ck": 1, "v": None, "t": "y", "s": [1, 2, 3], "m": [{"key": 1, "value": "a"}],
     "u": {"a": 1, "b": "q"}, "d": 19884},
    {"pk": 1, "ck": 2, "v": 7, "t": None, "s": None, "m": None, "u": None, "d": None},
    {"pk": 2, "ck": 1, "v": 9, "t": None, "s": None, "m": [{"key": 2, "value": "b"}], "u": None, "d": None},
    {"pk": 3, "ck": 1, "v": None, "t": "snap", "s": None, "m": None, "u": {"a": None, "b": "z"}, "d": None},
    {"pk": 1, "ck": 1, "v": 6, "t": "y", "s": [1, 2, 3], "m": [{"key": 1, "value": "a"}], "u": {"a": 1, "b": "q"},
     "d": 19884},
]


@pytest.mark.parametrize("value_format", FORMATS)
def test_flatten_gives_the_post_images_and_drops_the_imageless_delete(spark: Any, stack: Endpoints,
                                                                      value_format: str) -> None:
    from bridge.spark.core.avro import AvroDecoder, AvroRecordFlattener
    from bridge.spark.core.decode import ValueFormat, decode
    from bridge.spark.core.record_flattener import Flattener, RecordFlattener
    from bridge.spark.core.smt_options import SmtOptions
    from bridge.spark.flatten.flatten import flatten

    table = AdvancedTable(f"adv{uuid.uuid4().hex[:8]}", "ks", "t")
    _produce(stack, table, value_format)
    fmt = ValueFormat(value_format)
    avro = AvroDecoder(stack.schema_registry_url, advanced=True) if fmt is ValueFormat.AVRO else None
    batch = _read(spark, stack, table.topic).persist()
    schemas = fmt is ValueFormat.JSON_SCHEMAS
    for mode, tombstone_kept in (("tombstone", False), ("rewrite-with-tombstone", True)):
        options = SmtOptions.from_properties({"delete.tombstone.handling.mode": mode}, advanced_input=True)
        outputs = [flatten(g, options, schemas) for g in decode(batch, fmt, avro, advanced=True)]
        rows = sorted((r for frame in outputs for r in frame.select("offset", "value").collect()),
                      key=lambda r: r["offset"])
        got = [_payload(r["value"], schemas) for r in rows]
        extra = {"__deleted": "false"} if mode == "rewrite-with-tombstone" else {}
        expected: list[Any] = [{**row, **extra} for row in EXPECTED_FLAT]
        if tombstone_kept:
            expected.insert(3, "tombstone")
        if fmt is ValueFormat.JSON:  # schemaless: Spark writes the inferred struct's fields by name
            got = [g if g == "tombstone" else dict(sorted(g.items())) for g in got]
            expected = [e if e == "tombstone" else dict(sorted(e.items())) for e in expected]
        assert got == expected, mode
        if fmt is ValueFormat.JSON:
            continue
        # the tasks' per-record flattening writes the same records
        records: Flattener = (AvroRecordFlattener(options, schemas, AvroDecoder(stack.schema_registry_url))
                              if avro else RecordFlattener(options, schemas))
        per_record = []
        for row in batch.orderBy("offset").collect():
            flat = records.flatten(bytes(row["value"]) if row["value"] is not None else None, None, lambda: "t")
            if flat is not None:
                per_record.append(_payload(flat.value.decode() if flat.value is not None else None, schemas))
        assert per_record == expected, mode
    batch.unpersist()


def _mirror_rows(spark: Any, root: Path, table: AdvancedTable,
                 frame: Any = None) -> dict[tuple[int, int], dict[str, Any]]:
    """The Delta table's rows (or those of `frame`, the current-state view)."""
    rows = (spark.read.format("delta").load(str(root / table.keyspace / table.table)) if frame is None
            else frame).collect()
    found = {}
    for row in rows:
        data = row.asDict(recursive=True)
        values = {name: data[name] for name in VALUE_COLUMNS}
        found[(data["pk"], data["ck"])] = values
    return found


def _expected_in_delta(state: dict[str, Any]) -> dict[str, Any]:
    """A row of FULL_AFTER_STATE in the mirror's types: maps as maps, dates as dates."""
    import datetime

    converted = dict(state)
    converted["m"] = {e["key"]: e["value"] for e in state["m"]} if state["m"] is not None else None
    converted["d"] = datetime.date(1970, 1, 1) + datetime.timedelta(days=state["d"]) if state["d"] else None
    return converted


@pytest.mark.parametrize(("value_format", "placement"), [
    ("json-schemas", "kafka-key,payload-after,payload-before"),
    ("avro", "kafka-key,payload-after,payload-before"),
    ("json", "kafka-key,payload-after,payload-before"),
    ("json-schemas", "payload-key"),
])
def test_mirror_with_full_post_images_equals_the_table(spark: Any, stack: Endpoints, tmp_path: Path,
                                                       value_format: str, placement: str) -> None:
    from bridge.spark.core.cdc_format import CdcFormat
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.jobs import SourceOptions, avro_decoder
    from bridge.spark.mirror.view import current_state
    from bridge.spark.mirror.writer import MirrorWriter

    table = AdvancedTable(f"advm{uuid.uuid4().hex[:8]}", "ks", "t", frozenset(placement.split(",")))
    _produce(stack, table, value_format)
    cdc = CdcFormat().overridden({"cdc.output.format": "advanced", "cdc.include.after": "full",
                                  "cdc.include.primary-key.placement": placement})
    source = SourceOptions(stack.kafka_bootstrap, (table.topic,), value_format=ValueFormat(value_format),
                           registry_url=stack.schema_registry_url, cdc=cdc)
    root = tmp_path / "mirror"
    writer = MirrorWriter(str(root), "adv", source.value_format, avro_decoder(source), cdc, source.registry_url)
    batch = _read(spark, stack, table.topic)
    writer(batch.where("offset < 4"), 0)  # c, u, c (1, 2), d (1, 2): then the rest
    writer(batch.where("offset >= 4"), 1)
    writer(batch.where("offset >= 4"), 1)  # a micro-batch re-run changes nothing
    expected = {key: _expected_in_delta(state) for key, state in FULL_AFTER_STATE.items()}
    if value_format == "json":  # schemaless: types inferred (dates stay days; entry arrays still read as maps)
        expected = {key: {**_expected_in_delta(state), "d": state["d"]} for key, state in FULL_AFTER_STATE.items()}
    # both micro-batches pending (a compaction every 10 by default): the view folds them
    view = current_state(spark, str(root), table.keyspace, table.table)
    assert _mirror_rows(spark, root, table, view) == expected
    writer.compact(spark)
    assert _mirror_rows(spark, root, table) == expected
    schema = spark.read.format("delta").load(str(root / table.keyspace / table.table)).schema
    roles = {f.name: f.metadata.get("cdc.role") for f in schema.fields if f.metadata}
    keys = [n for n, role in roles.items() if role == "key"]
    assert keys == (sorted(KEY_COLUMNS) if value_format == "json" else list(KEY_COLUMNS))  # schemaless: by name


def test_a_new_checkpoints_micro_batches_from_0_again_are_written(spark: Any, stack: Endpoints,
                                                                  tmp_path: Path) -> None:
    """A new checkpoint (the old one deleted, or another path under the same --name) is a new
    streaming query: Spark keeps the query's id in the checkpoint and sets it on the thread that
    runs foreachBatch, and numbers the micro-batches from 0 again. They must be written, not taken
    for the earlier checkpoint's (Delta's idempotent writes once keyed them by the name alone)."""
    from bridge.spark.core.cdc_format import CdcFormat
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.mirror.writer import MirrorWriter

    table = AdvancedTable(f"advq{uuid.uuid4().hex[:8]}", "ks", "t", frozenset({"kafka-key", "payload-after"}))
    _produce(stack, table, "json-schemas")
    root = tmp_path / "mirror"
    cdc = CdcFormat().overridden(
        {"cdc.output.format": "advanced", "cdc.include.after": "full",
         "cdc.include.primary-key.placement": "kafka-key,payload-after"})
    writer = MirrorWriter(str(root), "same-name", ValueFormat.JSON_SCHEMAS, None, cdc, None)
    batch = _read(spark, stack, table.topic)
    context = spark.sparkContext
    try:
        context.setLocalProperty("sql.streaming.queryId", "first-checkpoint")
        writer(batch.where("offset < 2"), 0)
        writer(batch.where("offset >= 2 AND offset < 4"), 1)
        context.setLocalProperty("sql.streaming.queryId", "new-checkpoint")
        writer(batch.where("offset >= 4"), 0)
    finally:
        context.setLocalProperty("sql.streaming.queryId", None)
    writer.compact(spark)
    assert _mirror_rows(spark, root, table) == {key: _expected_in_delta(s) for key, s in FULL_AFTER_STATE.items()}
