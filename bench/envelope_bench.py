"""Translation + serialization throughput of a typical 10-column change, on one core.

Prints one JSON object: records/s for translate alone, translate + JSON (schemas on and off),
translate + Avro (Confluent framing, the compiled encoder), and for comparison translate + Avro
through fastavro's `schemaless_writer` with tuple-notation branch hints (same bytes). Targets
(issue 5): >= 100k/s for translate + JSON, >= 50k/s for translate + Avro. Rates are records per
second of process CPU time (one core; the code is single-threaded), best of 3 passes.

Shared machines are often busy, and a busy core gives lower rates. For context only, the output
also carries the rate of a calibration workload measured right before each pass (fastavro
writing a flat 3-field record; ../shared/reference/ecosystem.md section 4.3 measured about 420k/s
on an idle 2-core machine of this kind) and the 1-minute load average. Nothing is scaled by
them: the rates are what the passes measured; quote them with the machine and its load.

Avro schemas are registered once, before timing, with an in-process registry unless
`--registry-url` names a real one (registration is not on the per-record path).

    .venv/bin/python bench/envelope_bench.py [--records 100000] [--registry-url URL]
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.avro_serializer import AvroSerializer, SchemaRegistry
from bridge.envelope.connect_schema import ConnectSchema
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.plan import TablePlan, build_plan
from bridge.envelope.settings import EnvelopeSettings, IncludeMode, OutputFormat
from bridge.envelope.translate import translate
from bridge.envelope.translator import Translator
from bridge.kafka.registry import registry_client
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.schema import Column, ColumnKind, TableSchema, scalar
from bridge.testing import InProcessRegistry

NOW_MICROS = 1_718_022_902_001_000


def typical_table() -> TableSchema:
    """10 columns: a partition key, a clustering key and 8 regular columns of common types."""
    spec = [
        ("user_id", "uuid", ColumnKind.PARTITION_KEY),
        ("event_time", "timestamp", ColumnKind.CLUSTERING),
        ("name", "text", ColumnKind.REGULAR),
        ("email", "text", ColumnKind.REGULAR),
        ("age", "int", ColumnKind.REGULAR),
        ("score", "double", ColumnKind.REGULAR),
        ("visits", "bigint", ColumnKind.REGULAR),
        ("active", "boolean", ColumnKind.REGULAR),
        ("country", "text", ColumnKind.REGULAR),
        ("session", "timeuuid", ColumnKind.REGULAR),
    ]
    return TableSchema("shop", "events", tuple(Column(n, scalar(t), k) for n, t, k in spec))


def typical_records(count: int) -> list[ChangeRecord]:
    """Distinct single-row upserts (as most CDC records are), every column set."""
    base = datetime.datetime(2024, 6, 10, 12, 0, 0)
    records = []
    for i in range(count):
        micros = NOW_MICROS - 5_000_000 + i
        values = {
            "user_id": uuid.UUID(int=i * 7919),
            "event_time": base + datetime.timedelta(milliseconds=i),
            "name": f"user {i}",
            "email": f"user{i}@example.com",
            "age": 20 + i % 50,
            "score": i * 0.25 + 0.1,
            "visits": i * 3,
            "active": i % 2 == 0,
            "country": "PL" if i % 3 else "SE",
            "session": timeuuid_for(micros),
        }
        stream = _stream(i)
        op = Operation.INSERT if i % 4 == 0 else Operation.UPDATE
        records.append(
            ChangeRecord("shop", "events", (LogRow(stream, timeuuid_for(micros), 0, op, None, True, values),))
        )
    return records


def with_post_images(records: list[ChangeRecord]) -> list[ChangeRecord]:
    """The same changes as a table with `'postimage': true` logs them: each delta row followed by
    the row's post-image (every column; here the delta sets them all), the last row ending the batch."""
    imaged = []
    for record in records:
        (delta,) = record.rows
        first = LogRow(delta.stream_id, delta.time, 0, delta.operation, None, False, delta.values)
        post = LogRow(delta.stream_id, delta.time, 1, Operation.POST_IMAGE, None, True, delta.values)
        imaged.append(ChangeRecord(record.keyspace, record.table, (first, post)))
    return imaged


def _stream(i: int) -> Any:
    from bridge.scylla.stream_id import StreamId

    return StreamId.build(i * 104729 - (1 << 62), i, i % 256)


def _rate(records: list[Any], work: Callable[[Any], object]) -> float:
    start = time.process_time()
    for record in records:
        work(record)
    return len(records) / (time.process_time() - start)


def flat3_rate() -> float:
    """Today's rate of the calibration workload (context for the rates, not a correction)."""
    schema = fastavro.parse_schema(
        {
            "type": "record",
            "name": "Flat",
            "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}, {"name": "c", "type": "double"}],
        }
    )
    datum = {"a": 123456789, "b": "hello world", "c": 3.5}
    out = io.BytesIO()

    def write(_: object) -> None:
        out.seek(0)
        out.truncate()
        fastavro.schemaless_writer(out, schema, datum)

    return _rate([None] * 20_000, write)


class FastavroHinted:
    """Avro through fastavro, the way issue 5 suggested: the schema's Avro form without
    `connect.*` properties or logical types (fastavro's quickest paths, same bytes) and every
    non-null optional struct given as `(record full name, value)` so fastavro need not search
    the union. Kept here to show why the bridge uses its compiled encoder instead."""

    def __init__(self, schema: ConnectSchema) -> None:
        self.parsed = fastavro.parse_schema(_writer_form(avro_schema(schema)))
        self.adapt = _hinting(schema)
        self.out = io.BytesIO()

    def serialize(self, value: Any) -> bytes:
        self.out.seek(0)
        self.out.truncate()
        fastavro.schemaless_writer(self.out, self.parsed, self.adapt(value))
        return self.out.getvalue()


def _writer_form(avro: Any) -> Any:
    if isinstance(avro, list):
        return [_writer_form(branch) for branch in avro]
    if not isinstance(avro, dict):
        return avro
    if avro["type"] == "record":
        fields = [{"name": f["name"], "type": _writer_form(f["type"])} for f in avro["fields"]]
        return {"type": "record", "name": avro["name"], "namespace": avro.get("namespace", ""), "fields": fields}
    if avro["type"] == "array":
        return {"type": "array", "items": _writer_form(avro["items"])}
    return avro["type"]


def _hinting(schema: ConnectSchema) -> Callable[[Any], Any]:
    if schema.type == "struct":
        members = [(f.name, _hinting(f.schema)) for f in schema.fields]

        def struct_value(value: Any) -> Any:
            return {name: None if value[name] is None else adapt(value[name]) for name, adapt in members}

        inner: Callable[[Any], Any] = struct_value
    elif schema.type == "array":
        assert schema.items is not None
        item = _hinting(schema.items)

        def array_value(values: Any) -> Any:
            return [None if v is None else item(v) for v in values]

        inner = array_value
    else:
        return lambda value: value
    if schema.optional and schema.type == "struct":
        name = schema.name
        return lambda value: (name, inner(value))
    return inner


def run(count: int, registry: SchemaRegistry) -> dict[str, Any]:
    plan: TablePlan = build_plan(typical_table(), EnvelopeSettings("bench"))
    records = typical_records(count)
    json_on, json_off = JsonSerializer(True), JsonSerializer(False)
    avro_key, avro_value = AvroSerializer(registry, True), AvroSerializer(registry, False)
    avro_key.register(plan.topic, plan.key_schema)  # as RecordSerializer.prepare does at plan build
    avro_value.register(plan.topic, plan.value_schema)
    fastavro_key, fastavro_value = FastavroHinted(plan.key_schema), FastavroHinted(plan.value_schema)

    def translated(record: ChangeRecord) -> Any:
        return translate(plan, record, NOW_MICROS).records[0]

    def with_serializers(key_side: Any, value_side: Any) -> Callable[[ChangeRecord], object]:
        def work(record: ChangeRecord) -> object:
            out = translated(record)
            return (
                key_side.serialize(out.topic, out.key_schema, out.key),
                value_side.serialize(out.topic, out.value_schema, out.value),
            )

        return work

    def with_fastavro(record: ChangeRecord) -> object:
        out = translated(record)
        return fastavro_key.serialize(out.key), fastavro_value.serialize(out.value)

    results: dict[str, Any] = {}
    calibrations: list[float] = []
    for name, work in [
        ("translate_only", translated),
        ("translate_json_schemas_off", with_serializers(json_off, json_off)),
        ("translate_json_schemas_on", with_serializers(json_on, json_on)),
        ("translate_avro", with_serializers(avro_key, avro_value)),
        ("translate_avro_via_fastavro_hinted", with_fastavro),
    ]:
        work(records[0])  # warm-up: JSON schema rendering happens here, once
        passes = []
        for _ in range(3):
            calibrations.append(flat3_rate())  # right before each pass: the load changes all the time
            passes.append(_rate(records, work))
        results[name] = round(max(passes))
    results.update(advanced_rates(records, registry, calibrations))
    sample = translated(records[1])
    assert (
        fastavro_value.serialize(sample.value)
        == (avro_value.serialize(sample.topic, sample.value_schema, sample.value) or b"")[5:]
    )
    return {
        "benchmark": "envelope",
        "records": count,
        "columns": 10,
        "records_per_second": results,
        "targets": {"translate_json": 100_000, "translate_avro": 50_000},
        "calibration": {
            "flat3_fastavro_records_per_second_min": round(min(calibrations)),
            "flat3_fastavro_records_per_second_max": round(max(calibrations)),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
        "bytes_per_record": {
            "json_schemas_off": len(json_off.serialize(sample.topic, sample.value_schema, sample.value) or b""),
            "json_schemas_on": len(json_on.serialize(sample.topic, sample.value_schema, sample.value) or b""),
            "avro": len(avro_value.serialize(sample.topic, sample.value_schema, sample.value) or b""),
        },
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def advanced_rates(records: list[ChangeRecord], registry: SchemaRegistry, calibrations: list[float]) -> dict[str, int]:
    """Issue 25: the advanced format as its users run it (`cdc.include.after=full`, the table
    logging post-images: two log rows per change), translate + serialize; beside it legacy on the
    very same log records (it passes the post-images by), so that both read the same input."""
    advanced = EnvelopeSettings("bench", cdc_output_format=OutputFormat.ADVANCED, cdc_include_after=IncludeMode.FULL)
    imaged = with_post_images(records)
    rates = {}
    for label, settings in (("legacy_post_imaged", EnvelopeSettings("bench")), ("advanced", advanced)):
        translator = Translator(settings)
        plan = translator.plan(typical_table())
        avro_key, avro_value = AvroSerializer(registry, True), AvroSerializer(registry, False)
        avro_key.register(plan.topic, plan.key_schema)
        avro_value.register(plan.topic, plan.value_schema)
        json_off = JsonSerializer(False)
        for side, key_side, value_side in (("json_schemas_off", json_off, json_off), ("avro", avro_key, avro_value)):
            work = _translated_serialized(translator, key_side, value_side)
            work(imaged[0])
            passes = []
            for _ in range(3):
                calibrations.append(flat3_rate())
                passes.append(_rate(imaged, work))
            rates[f"{label}_translate_{side}"] = round(max(passes))
    return rates


def _translated_serialized(translator: Translator, key_side: Any, value_side: Any) -> Callable[[ChangeRecord], object]:
    table = typical_table()

    def work(record: ChangeRecord) -> object:
        out = translator.translate(record, table).records[0]
        return (
            key_side.serialize(out.topic, out.key_schema, out.key),
            value_side.serialize(out.topic, out.value_schema, out.value),
        )

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--registry-url", default=None, help="a Confluent-compatible registry (default: in-process)")
    parser.add_argument("--record", action="store_true", help="merge the *_1core keys into bench/results.json")
    args = parser.parse_args()
    registry = registry_client(args.registry_url) if args.registry_url else InProcessRegistry()
    result = run(args.records, registry)
    print(json.dumps(result, indent=2))
    if args.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.__main__ import one_core_rates
        from bench.results import command_line, record

        record({k: v for k, v in one_core_rates(result).items() if v is not None}, command_line(),
               bench="envelope_bench")


if __name__ == "__main__":
    main()
