"""Golden tests of the flattening: each operation kind under each delete mode gives exactly the
output reference/ecosystem.md 2.2 documents for ExtractNewRecordState (+ the Scylla SMT's cell
unwrapping), read by Spark's Kafka source from envelopes the bridge's own serializers wrote. A
snapshot row (`op` = `r`: the inserted row whole, `source.snapshot` = `true`) flattens as the
insert does, with `r` as its op, in both the Spark-expression and the per-record path."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from bridge.envelope import EnvelopeSettings, KafkaRecord, Translator, build_record_serializer
from bridge.envelope.settings import ConverterKind
from bridge.kafka.registry import registry_client
from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints

NOW_US = 1_700_000_000_123_456
MODES: dict[str, dict[str, str]] = {
    "default": {},
    "tombstone+fields": {"delete.tombstone.handling.mode": "tombstone", "add.fields": "op,source.ts_ms",
                         "add.headers": "op"},
    "drop": {"delete.tombstone.handling.mode": "drop"},
    "rewrite": {"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,table_name,missing"},
    "rewrite-with-tombstone": {"delete.tombstone.handling.mode": "rewrite-with-tombstone", "add.headers": "op"},
    "delete-to-tombstone": {"delete.tombstone.handling.mode": "delete-to-tombstone"},
    "legacy none, keep tombstones": {"delete.handling.mode": "none", "drop.tombstones": "false"},
}


@dataclass
class Written:
    prefix: str
    ts_ms: list[int]  # source.ts_ms of the c, u, d envelopes (the r has the c's)


def _snapshot_of(insert: KafkaRecord) -> KafkaRecord:
    """The snapshot row (`op` = `r`) of an insert's row, as the worker writes one: `before` null,
    every column a cell (`{"value": null}` for a null column), element changes null, the
    insert's write time, `source.snapshot` = `true`."""
    assert insert.value is not None and insert.value["op"] == "c"
    after = {name: value if name in insert.key or name.endswith("__elements") or value is not None
             else {"value": None} for name, value in insert.value["after"].items()}
    value = {**insert.value, "op": "r", "before": None, "after": after,
             "source": {**insert.value["source"], "snapshot": "true"}}
    return KafkaRecord(insert.topic, insert.key, insert.key_schema, value, insert.value_schema)


def _with_snapshot(records: list[KafkaRecord]) -> list[KafkaRecord]:
    """The records, then the snapshot row of the first insert's row (after Debezium's tombstone)."""
    return [*records, _snapshot_of(next(r for r in records if r.value is not None and r.value.get("op") == "c"))]


def _four_changes(emu: Emulator, table: str, insert: str, update: str) -> list[Any]:
    """An insert and an update of row (1, 1), its delete, and a range delete of its partition."""
    records = emu.execute(f"INSERT INTO {table} {insert}")
    records += emu.execute(f"UPDATE {table} SET {update} WHERE pk = 1 AND ck = 1")
    records += emu.execute(f"DELETE FROM {table} WHERE pk = 1 AND ck = 1")
    return records + emu.execute(f"DELETE FROM {table} WHERE pk = 1 AND ck > 3")


@pytest.fixture(scope="module")
def written(stack: Endpoints) -> Iterator[dict[str, Written]]:
    """The same four changes written twice, as JSON without and with schemas."""
    keyspace = f"ks_golden_{uuid.uuid4().hex[:8]}"
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                    "'replication_factor': 1}")
        emu.execute(f"CREATE TABLE {keyspace}.t (pk int, ck int, v int, t text, s set<int>, PRIMARY KEY (pk, ck))"
                    " WITH cdc = {'enabled': true}")
        records = _four_changes(emu, f"{keyspace}.t", "(pk, ck, v, t) VALUES (1, 1, 5, 'x')",
                                "v = null, t = 'y', s = s + {3}")
        schema = emu.table(keyspace, "t").schema
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        failures: list[Any] = []
        found = {}
        for schemas in (False, True):
            prefix = f"g{uuid.uuid4().hex[:8]}"
            settings = EnvelopeSettings(
                topic_prefix=prefix, key_converter_schemas_enable=schemas,
                value_converter_schemas_enable=schemas, dropped_changes_topic=f"{prefix}.dropped")
            translator = Translator(settings, clock_micros=lambda: NOW_US)
            serializer = build_record_serializer(settings)
            ts_ms = []
            translated = [out for record in records for out in translator.translate(record, schema).records]
            for out in _with_snapshot(translated):
                key, value = serializer.serialize(out)
                producer.produce(out.topic, key=key, value=value,
                                 on_delivery=lambda err, _msg: err and failures.append(err))
                if out.value is not None and out.value.get("op") in ("c", "u", "d"):
                    ts_ms.append(out.value["source"]["ts_ms"])
            assert producer.flush(30) == 0 and not failures, f"golden records not delivered: {failures}"
            found["true" if schemas else "false"] = Written(prefix, ts_ms)
        try:
            yield found
        finally:
            emu.session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)


def flattened(spark: Any, stack: Endpoints, prefix: str, schemas: bool, schemas_out: bool | None = None,
              avro: bool = False) -> dict[str, list[tuple[str, Any, Any]]]:
    """{mode: [(topic kind, value text, headers)]} in topic/offset order, in one Spark job."""
    from pyspark.sql import functions as F

    from bridge.spark.core.avro import AvroDecoder
    from bridge.spark.core.decode import ValueFormat, decode
    from bridge.spark.core.smt_options import SmtOptions
    from bridge.spark.flatten.flatten import flatten

    batch = (spark.read.format("kafka").option("kafka.bootstrap.servers", stack.kafka_bootstrap)
             .option("subscribePattern", prefix + r"\..*").option("includeHeaders", "true")
             .option("kafka.isolation.level", "read_committed").load()).persist()
    if avro:
        groups = decode(batch, ValueFormat.AVRO, AvroDecoder(stack.schema_registry_url))
    else:
        groups = decode(batch, ValueFormat.JSON_SCHEMAS if schemas else ValueFormat.JSON)
    frames = []
    for mode, properties in MODES.items():
        options = SmtOptions.from_properties(properties)
        for group in groups:
            frame = flatten(group, options, schemas if schemas_out is None else schemas_out)
            frames.append(frame.select(F.lit(mode).alias("mode"), "topic", "offset", "value", "headers"))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    result: dict[str, list[tuple[str, Any, Any]]] = {mode: [] for mode in MODES}
    for row in union.orderBy("mode", "topic", "offset").collect():
        kind = "dropped" if row["topic"].endswith(".dropped") else f"data@{row['offset']}"
        headers = [(h["key"], bytes(h["value"])) for h in row["headers"] or []]
        result[row["mode"]].append((kind, row["value"], headers))
    batch.unpersist()
    return result


def payloads(written: Written) -> dict[str, str]:
    c_ts, u_ts, d_ts = written.ts_ms
    row = '"ck":1,"pk":1,"s":{s},"s__elements":{e},"t":{t},"v":{v}'
    return {
        "c": row.format(s="null", e="null", t='"x"', v="5"),
        "u": row.format(s="null", e='{"added":[3],"removed":null}', t='"y"', v="null"),
        "d": row.format(s="null", e="null", t="null", v="null"),
        "c_ts": str(c_ts), "u_ts": str(u_ts), "d_ts": str(d_ts),
    }


def test_every_operation_under_every_delete_mode_schemaless(spark: Any, stack: Endpoints,
                                                           written: dict[str, Written]) -> None:
    """JSON without schemas: values exactly as JsonConverter writes the SMT's output."""
    w = written["false"]
    p = payloads(w)
    out = flattened(spark, stack, w.prefix, schemas=False)
    dropped = [v for kind, v, _ in out["default"] if kind == "dropped"]
    assert len(dropped) == 1 and orjson.loads(dropped[0])["kind"] == "range_delete"  # not an envelope: unchanged

    def data(mode: str) -> list[tuple[str, Any, Any]]:
        return [entry for entry in out[mode] if entry[0] != "dropped"]

    plain_c, plain_u = "{" + p["c"] + "}", "{" + p["u"] + "}"
    # data@4, the snapshot row of the inserted row: what the insert gives, `r` as its op
    assert data("default") == [("data@0", plain_c, []), ("data@1", plain_u, []), ("data@2", "null", []),
                               ("data@4", plain_c, [])]
    assert data("tombstone+fields") == [
        ("data@0", "{" + p["c"] + f',"__op":"c","__source_ts_ms":{p["c_ts"]}' + "}", [("__op", b"c")]),
        ("data@1", "{" + p["u"] + f',"__op":"u","__source_ts_ms":{p["u_ts"]}' + "}", [("__op", b"u")]),
        ("data@2", "null", [("__op", b"d")]),
        ("data@4", "{" + p["c"] + f',"__op":"r","__source_ts_ms":{p["c_ts"]}' + "}", [("__op", b"r")]),
    ]
    assert data("drop") == [("data@0", plain_c, []), ("data@1", plain_u, []), ("data@4", plain_c, [])]
    assert data("rewrite") == [
        ("data@0", "{" + p["c"] + ',"__deleted":"false","__op":"c","__table_name":"t"}', []),
        ("data@1", "{" + p["u"] + ',"__deleted":"false","__op":"u","__table_name":"t"}', []),
        ("data@2", "{" + p["d"] + ',"__deleted":"true","__op":"d","__table_name":"t"}', []),
        ("data@4", "{" + p["c"] + ',"__deleted":"false","__op":"r","__table_name":"t"}', []),
    ]
    assert data("rewrite-with-tombstone") == [
        ("data@0", "{" + p["c"] + ',"__deleted":"false"}', [("__op", b"c")]),
        ("data@1", "{" + p["u"] + ',"__deleted":"false"}', [("__op", b"u")]),
        ("data@2", "{" + p["d"] + ',"__deleted":"true"}', [("__op", b"d")]),
        ("data@3", None, [("__op", b"d")]),  # Debezium's tombstone kept, with only the op header
        ("data@4", "{" + p["c"] + ',"__deleted":"false"}', [("__op", b"r")]),
    ]
    assert data("delete-to-tombstone") == [("data@0", plain_c, []), ("data@1", plain_u, []), ("data@2", None, []),
                                           ("data@4", plain_c, [])]
    assert data("legacy none, keep tombstones") == [
        ("data@0", plain_c, []), ("data@1", plain_u, []), ("data@2", "null", []), ("data@3", None, []),
        ("data@4", plain_c, []),
    ]


def test_schemas_on_carry_the_flattened_connect_schema(spark: Any, stack: Endpoints,
                                                      written: dict[str, Written]) -> None:
    """JSON with schemas: the value schema is after's basics (optional false), cells replaced by
    their optional inner schema, then `__deleted` and the added fields; a tombstone-mode delete
    carries after's own schema with a null payload."""
    w = written["true"]
    p = payloads(w)
    out = flattened(spark, stack, w.prefix, schemas=True)
    name = f"{w.prefix}.{'%s'}.t"
    keyspace = next(orjson.loads(v)["payload"]["source"]["db"] for k, v, _ in out["default"] if k == "dropped")
    base = name % keyspace
    elements = ('{"type":"struct","fields":[{"type":"array","items":{"type":"int32","optional":true},"optional":true,'
                '"field":"added"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,'
                f'"field":"removed"}}],"optional":true,"name":"{base}.s.Elements","field":"s__elements"}}')
    flat_fields = ('{"type":"int32","optional":true,"field":"ck"},{"type":"int32","optional":true,"field":"pk"},'
                   '{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"s"},'
                   + elements + ',{"type":"string","optional":true,"field":"t"},'
                   '{"type":"int32","optional":true,"field":"v"}')
    rewrite_schema = ('{"schema":{"type":"struct","fields":[' + flat_fields + ',{"type":"string","optional":true,'
                      '"field":"__deleted"},{"type":"string","optional":true,"field":"__op"},'
                      '{"type":"string","optional":true,"field":"__table_name"}],"optional":false,"name":"')
    values = {kind: v for kind, v, _ in out["rewrite"]}
    assert values["data@0"] == (rewrite_schema + base + '.After"},"payload":{' + p["c"]
                                + ',"__deleted":"false","__op":"c","__table_name":"t"}}')
    assert values["data@2"] == (rewrite_schema + base + '.Before"},"payload":{' + p["d"]
                                + ',"__deleted":"true","__op":"d","__table_name":"t"}}')
    assert values["data@4"] == (rewrite_schema + base + '.After"},"payload":{' + p["c"]
                                + ',"__deleted":"false","__op":"r","__table_name":"t"}}')  # the snapshot row
    default = {kind: v for kind, v, _ in out["default"]}
    assert default["data@0"] == ('{"schema":{"type":"struct","fields":[' + flat_fields + '],"optional":false,'
                                 f'"name":"{base}.After"' + '},"payload":{' + p["c"] + "}}")
    assert default["data@4"] == default["data@0"]
    tombstone = orjson.loads(default["data@2"])
    assert tombstone["payload"] is None
    assert tombstone["schema"]["name"] == f"{base}.After" and tombstone["schema"]["optional"] is True
    assert [f["field"] for f in tombstone["schema"]["fields"]] == ["ck", "pk", "s", "s__elements", "t", "v"]
    assert tombstone["schema"]["fields"][5]["name"] == f"{base}.v.Cell"  # cells still wrapped: not flattened


def _raw_supplementary(text: str | None) -> str | None:
    """The one difference allowed: characters beyond U+FFFF escaped as a UTF-16 surrogate pair,
    as JsonConverter writes them (the Python path), where Spark's `to_json` writes them raw."""
    if text is None:
        return None
    pair = re.compile(r"\\u(D[89AB][0-9A-F]{2})\\u(D[C-F][0-9A-F]{2})")
    return pair.sub(lambda m: chr(0x10000 + ((int(m[1], 16) - 0xD800) << 10) + int(m[2], 16) - 0xDC00), text)


@pytest.fixture(scope="module")
def typed(stack: Endpoints) -> Iterator[dict[str, str]]:
    """Changes of a table of many types (floats, doubles, blobs, dates, timestamps, maps with
    non-text keys, lists, a UDT) written as JSON with schemas and as Avro through the registry:
    {format: topic prefix}."""
    keyspace = f"ks_typed_{uuid.uuid4().hex[:8]}"
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        emu.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                    "'replication_factor': 1}")
        emu.execute(f"CREATE TYPE {keyspace}.pt (x double, label text)")
        emu.execute(f"CREATE TABLE {keyspace}.r (pk int, ck int, d double, f float, b blob, dt date, ts timestamp, "
                    "m map<int, text>, l frozen<list<double>>, u frozen<pt>, t text, PRIMARY KEY (pk, ck)) "
                    "WITH cdc = {'enabled': true}")
        records = _four_changes(
            emu, f"{keyspace}.r", "(pk, ck, d, f, b, dt, ts, m, l, u, t) VALUES (1, 1, 1e21, "
            "0.1, 0xcafe, '2024-06-10', '2024-06-10 12:34:56.789+0000', {2: 'two'}, [1e-5, 2.5], "
            "{x: -0.0, label: 'tab\t 😀'}, 'ctl\x01')",
            "d = 3.5, m = m + {3: 'three'}, t = null")
        schema = emu.table(keyspace, "r").schema
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        failures: list[Any] = []
        found = {}
        for kind in ("json-schemas", "avro"):
            prefix = f"y{uuid.uuid4().hex[:8]}"
            converter = ConverterKind.AVRO if kind == "avro" else ConverterKind.JSON
            url = stack.schema_registry_url if kind == "avro" else None
            settings = EnvelopeSettings(
                topic_prefix=prefix, key_converter=converter, value_converter=converter,
                key_converter_schema_registry_url=url, value_converter_schema_registry_url=url,
                dropped_changes_topic=f"{prefix}.dropped")
            serializer = build_record_serializer(settings, registry_client)
            translator = Translator(settings, clock_micros=lambda: NOW_US, on_new_plan=serializer.prepare)
            translated = [out for record in records for out in translator.translate(record, schema).records]
            for out in _with_snapshot(translated):
                key, value = serializer.serialize(out)
                producer.produce(out.topic, key=key, value=value,
                                 on_delivery=lambda err, _msg: err and failures.append(err))
            assert producer.flush(30) == 0 and not failures, f"typed records not delivered: {failures}"
            found[kind] = prefix
        try:
            yield found
        finally:
            emu.session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)


@pytest.mark.parametrize("source", ["golden", "typed json-schemas", "typed avro"])
def test_the_tasks_record_flattener_writes_what_the_spark_flattening_writes(
        spark: Any, stack: Endpoints, written: dict[str, Written], typed: dict[str, str], source: str) -> None:
    """JSON with schemas and Avro, every delete mode, with and without schemas out: the
    per-record Python flattening the tasks run into Kafka gives the same values and headers,
    byte for byte but for the escapes of characters beyond U+FFFF, and drops the same records
    as the Spark-expression flattening; the snapshot row (data@4) gives what the insert (data@0)
    gives, with `r` for `c` in the added op."""
    from bridge.spark.core.avro import AvroDecoder, AvroRecordFlattener
    from bridge.spark.core.record_flattener import Flattener, RecordFlattener
    from bridge.spark.core.smt_options import SmtOptions

    avro = source.endswith("avro")
    prefix = written["true"].prefix if source == "golden" else typed[source.split()[1]]
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", stack.kafka_bootstrap)
           .option("subscribePattern", prefix + r"\..*").option("includeHeaders", "true").load()
           .orderBy("topic", "offset").collect())
    for schemas_out in (True, False):
        expected = flattened(spark, stack, prefix, schemas=True, schemas_out=schemas_out, avro=avro)
        for mode, properties in MODES.items():
            options = SmtOptions.from_properties(properties)
            records: Flattener = (AvroRecordFlattener(options, schemas_out, AvroDecoder(stack.schema_registry_url))
                                  if avro else RecordFlattener(options, schemas_out))
            got = []
            for row in raw:
                headers = [(h["key"], bytes(h["value"])) for h in row["headers"] or []]
                flat = records.flatten(None if row["value"] is None else bytes(row["value"]), headers or None,
                                       lambda: "a golden record")
                if flat is None:
                    continue
                if row["topic"].endswith(".dropped"):  # not an envelope: passed as it came
                    assert flat.value == bytes(row["value"])
                    if avro:
                        continue  # Avro bytes: the Spark path's text of them is not comparable
                    kind = "dropped"
                else:
                    kind = f"data@{row['offset']}"
                got.append((kind, None if flat.value is None else flat.value.decode(), flat.headers or []))
            if avro:
                expected[mode] = [entry for entry in expected[mode] if entry[0] != "dropped"]
            assert [(kind, _raw_supplementary(value), headers) for kind, value, headers in got] == expected[mode], (
                mode, schemas_out)
            by_kind = {kind: (value, headers) for kind, value, headers in got}
            insert, snapshot = by_kind["data@0"], by_kind["data@4"]
            assert insert[0] is not None and snapshot[0] == insert[0].replace('"__op":"c"', '"__op":"r"'), (
                mode, schemas_out)
            assert snapshot[1] == [(k, b"r" if k == "__op" else v) for k, v in insert[1]], (mode, schemas_out)
    assert sum(1 for kind, value, _ in expected["rewrite"] if kind != "dropped" and value) == 4  # c, u, d, r
