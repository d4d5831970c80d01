"""`decode.json_groups`: JSON with schemas parsed straight from a micro-batch nobody persists (the
mirror's way), against `decode` over the persisted, payload-only frame (the history's)."""

from __future__ import annotations

import datetime
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bridge.envelope.json_serializer import JsonSerializer
from bridge.scylla.model import Operation
from bridge.spark.core.decode import Group, ValueFormat, decode, json_groups, prepare
from tests.unit.envelope.support import make_table, plan_for, row, run

SOURCE = "topic string, partition int, offset long, timestamp timestamp, " \
    "headers array<struct<key: string, value: binary>>, key binary, value binary"


def _value(table: Any, doc: str | None = None, **values: Any) -> bytes:
    record = run(plan_for(table), row(Operation.INSERT, **values)).records[0]
    value = JsonSerializer(schemas_enable=True).serialize(record.topic, record.value_schema, record.value)
    assert value is not None
    if doc is not None:  # a schema text with multi-byte characters: payloads start at a byte, not a character
        value = value.replace(b'{"schema":{', b'{"schema":{"doc":"' + doc.encode() + b'",', 1)
    return value


def _parsed(groups: list[Group]) -> set[tuple[str, str, int, str | None]]:
    found: set[tuple[str, str, int, str | None]] = set()
    for group in groups:
        env = F.to_json("env") if group.kind == "envelope" else F.lit(None).cast("string")
        for r in group.frame.select("topic", "offset", env.alias("env")).collect():
            found.add((group.kind, r["topic"], r["offset"], r["env"]))
    return found


def test_groups_of_an_unpersisted_batch_are_counted_and_parse_as_the_persisted_ones(spark: Any) -> None:
    """Two schema versions and a tombstone in one topic, one schema with multi-byte text in another."""
    first = make_table(partition=[("pk", "int")], regular=[("t", "text")])
    second = make_table(partition=[("pk", "int")], regular=[("t", "text"), ("n", "int")])
    other = make_table(partition=[("pk", "int")], regular=[("t", "text")], name="u")
    at = datetime.datetime(2026, 1, 1)
    records = [("P.ks.t", 0, 0, _value(first, pk=1, t="a")), ("P.ks.t", 0, 1, _value(second, pk=2, t="b", n=7)),
               ("P.ks.t", 0, 2, None), ("P.ks.t", 0, 3, _value(first, pk=3, t="ü☃")),
               ("P.ks.u", 0, 0, _value(other, "schéma ☃", pk=4, t="ü☃")),
               ("P.ks.u", 0, 1, _value(other, "schéma ☃", pk=5, t="x"))]
    batch = spark.createDataFrame([(t, p, o, at, [], b"{}", v) for t, p, o, v in records], SOURCE)

    groups = json_groups(batch)
    assert sorted((g.topic, g.kind, g.records) for g in groups) == [
        ("P.ks.t", "envelope", 1), ("P.ks.t", "envelope", 2), ("P.ks.t", "tombstone", 1), ("P.ks.u", "envelope", 2)]
    got = _parsed(groups)
    persisted = prepare(batch, ValueFormat.JSON_SCHEMAS, payload_only=True).persist()
    try:
        assert got == _parsed(decode(persisted, ValueFormat.JSON_SCHEMAS))
    finally:
        persisted.unpersist()
    after = {(topic, offset): env for kind, topic, offset, env in got if env is not None}
    assert '"t":{"value":"ü☃"}' in after[("P.ks.t", 3)] and '"n":{"value":7}' in after[("P.ks.t", 1)]
    assert '"t":{"value":"ü☃"}' in after[("P.ks.u", 0)]


def test_groups_read_again_by_offsets_hold_the_batch_records_alone(spark: Any, kafka_bootstrap: str,
                                                                   make_topic: Any, topic_name: str) -> None:
    """The mirror's re-read of a topic's offsets (`core.kafka_ranges`): a batch of two topics that
    leaves out a topic's first record gives the same groups and records as filtering the batch."""
    from confluent_kafka import Producer

    from bridge.spark.core.kafka_ranges import KafkaRanges

    first = make_table(partition=[("pk", "int")], regular=[("t", "text")])
    second = make_table(partition=[("pk", "int")], regular=[("t", "text"), ("n", "int")])
    t, u = make_topic(f"{topic_name}.ks.t", partitions=2), make_topic(f"{topic_name}.ks.u")
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for topic, part, value in [(t, 0, _value(first, pk=1, t="left out")), (t, 0, _value(first, pk=2, t="a")),
                               (t, 0, None), (t, 0, _value(second, pk=3, t="b", n=7)),
                               (t, 1, _value(first, pk=4, t="c")), (u, 0, _value(first, pk=5, t="d"))]:
        producer.produce(topic, key=b"{}", value=value, partition=part)
    assert producer.flush(30) == 0
    options = {"kafka.bootstrap.servers": kafka_bootstrap, "kafka.isolation.level": "read_committed",
               "includeHeaders": "true"}
    batch = (spark.read.format("kafka").options(**options).option("subscribe", f"{t},{u}")
             .option("startingOffsets", f'{{"{t}": {{"0": 1, "1": 0}}, "{u}": {{"0": 0}}}}')
             .option("endingOffsets", "latest").load())

    filtered, reread = json_groups(batch), json_groups(batch, reread=KafkaRanges(options))
    assert sorted((g.topic, g.kind, g.records) for g in reread) == sorted(
        (g.topic, g.kind, g.records) for g in filtered) == [
        (t, "envelope", 1), (t, "envelope", 2), (t, "tombstone", 1), (u, "envelope", 1)]
    got = _in_one_job(reread)
    assert got == _in_one_job(filtered)
    assert {(topic, part, offset) for topic, part, offset, _ in got} == {(t, 0, 1), (t, 0, 2), (t, 0, 3), (t, 1, 0),
                                                                          (u, 0, 0)}


def _in_one_job(groups: list[Group]) -> set[tuple[str, int, int, str | None]]:
    frames = [g.frame.select("topic", "partition", "offset", (F.to_json("env") if g.kind == "envelope" else
                                                                F.lit(None).cast("string")).alias("env"))
              for g in groups]
    rows = reduce(DataFrame.unionByName, frames).collect()
    return {(r["topic"], r["partition"], r["offset"], r["env"]) for r in rows}
