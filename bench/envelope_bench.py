"""Translation + serialization throughput of a typical 10-column change, on one core.

Prints one JSON object: records/s for translate alone, translate + JSON (schemas on and off) and
translate + Avro (Confluent framing). Targets (issue 5): >= 100k/s for translate + JSON, >= 50k/s
for translate + Avro. Avro schemas are registered once, before timing, with an in-process registry
unless `--registry-url` names a real one (registration is not on the per-record path).

    .venv/bin/python bench/envelope_bench.py [--records 200000] [--registry-url URL]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
import uuid
from collections.abc import Callable
from typing import Any

from bridge.envelope.avro_serializer import AvroSerializer, SchemaRegistry, registry_client
from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.plan import TablePlan, build_plan
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.translate import translate
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.schema import Column, ColumnKind, TableSchema, scalar

NOW_MICROS = 1_718_022_902_001_000


class InProcessRegistry:
    """Hands out schema ids like a registry would; used when no registry URL is given."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def register_schema(self, subject_name: str, schema: Any, normalize_schemas: bool = False) -> int:
        return self.ids.setdefault(schema.schema_str, len(self.ids) + 1)


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


def _stream(i: int) -> Any:
    from bridge.scylla.stream_id import StreamId

    return StreamId.build(i * 104729 - (1 << 62), i, i % 256)


def _rate(records: list[ChangeRecord], work: Callable[[ChangeRecord], object]) -> float:
    start = time.perf_counter()
    for record in records:
        work(record)
    return len(records) / (time.perf_counter() - start)


def run(count: int, registry: SchemaRegistry) -> dict[str, Any]:
    plan: TablePlan = build_plan(typical_table(), EnvelopeSettings("bench"))
    records = typical_records(count)
    json_on, json_off = JsonSerializer(True), JsonSerializer(False)
    avro_key, avro_value = AvroSerializer(registry, True), AvroSerializer(registry, False)

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

    results: dict[str, Any] = {}
    for name, work in [
        ("translate_only", translated),
        ("translate_json_schemas_off", with_serializers(json_off, json_off)),
        ("translate_json_schemas_on", with_serializers(json_on, json_on)),
        ("translate_avro", with_serializers(avro_key, avro_value)),
    ]:
        work(records[0])  # warm-up: schema rendering / registration happens here, once
        results[name] = round(max(_rate(records, work) for _ in range(3)))
    sample = translated(records[1])
    return {
        "benchmark": "envelope",
        "records": count,
        "columns": 10,
        "records_per_second": results,
        "targets": {"translate_json": 100_000, "translate_avro": 50_000},
        "bytes_per_record": {
            "json_schemas_off": len(json_off.serialize(sample.topic, sample.value_schema, sample.value) or b""),
            "json_schemas_on": len(json_on.serialize(sample.topic, sample.value_schema, sample.value) or b""),
            "avro": len(avro_value.serialize(sample.topic, sample.value_schema, sample.value) or b""),
        },
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--registry-url", default=None, help="a Confluent-compatible registry (default: in-process)")
    args = parser.parse_args()
    registry = registry_client(args.registry_url) if args.registry_url else InProcessRegistry()
    print(json.dumps(run(args.records, registry), indent=2))


if __name__ == "__main__":
    main()
