"""`core.known_schemas` over real Kafka micro-batches: a topic's offsets come from the micro-batch's
plan, a known schema parses the next micro-batch without the groups job, and a schema change
(the table altered) is caught and read again the slow way, with every record parsed once."""

from __future__ import annotations

import tempfile
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bridge.spark.core.batch_offsets import batch_ranges
from bridge.spark.core.decode import Group, json_groups
from bridge.spark.core.kafka_ranges import KafkaRanges
from bridge.spark.core.known_schemas import KnownSchemas
from tests.spark.test_mirror_groups import _value
from tests.unit.envelope.support import make_table


def test_known_schemas_read_each_record_once_and_a_schema_change_is_read_again(
        spark: Any, kafka_bootstrap: str, make_topic: Any, topic_name: str) -> None:
    from confluent_kafka import Producer

    first = make_table(partition=[("pk", "int")], regular=[("t", "text")])
    altered = make_table(partition=[("pk", "int")], regular=[("t", "text"), ("n", "int")])
    t, u = make_topic(f"{topic_name}.ks.t", partitions=2), make_topic(f"{topic_name}.ks.u")
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    sent = [(t, 0, _value(first, pk=1, t="a")), (t, 1, _value(first, pk=2, t="b")), (u, 0, _value(first, pk=3))]
    for topic, part, value in sent:
        producer.produce(topic, key=b"{}", value=value, partition=part)
    assert producer.flush(30) == 0

    options = {"kafka.bootstrap.servers": kafka_bootstrap, "kafka.isolation.level": "read_committed",
               "includeHeaders": "true"}
    known = KnownSchemas(KafkaRanges(options))
    seen: list[dict[str, Any]] = []

    def micro_batch(batch: DataFrame, batch_id: int) -> None:
        def read() -> set[tuple[str, int, int, str]]:
            groups = known.groups(batch)
            fast = groups is not None
            if groups is None:
                groups = json_groups(batch, reread=KafkaRanges(options))
                known.learn(groups)
            attempt: dict[str, Any] = {"batch": batch_id, "fast": fast, "ranges": batch_ranges(batch)}
            seen.append(attempt)
            attempt["rows"] = _envelopes(groups)  # a schema that is not the known one fails here
            return attempt["rows"]  # type: ignore[no-any-return]

        known.retried(read)

    def run() -> None:
        query = (spark.readStream.format("kafka").options(**options).option("subscribe", f"{t},{u}")
                 .option("startingOffsets", "earliest").load().writeStream.foreachBatch(micro_batch)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()

    checkpoint = tempfile.mkdtemp(prefix="known-schemas-")
    run()  # the first micro-batch: schemas unknown, found by the groups job and learnt
    assert [(s["batch"], s["fast"]) for s in seen] == [(0, False)]
    assert seen[0]["ranges"] == {t: {0: (0, 1), 1: (0, 1)}, u: {0: (0, 1)}}
    assert batch_ranges(spark.range(1)) is None  # not a Kafka micro-batch: the caller finds its groups by a job

    producer.produce(t, key=b"{}", value=_value(first, pk=4, t="c"), partition=0)
    producer.produce(u, key=b"{}", value=None, partition=0)  # a tombstone: not an envelope, skipped
    assert producer.flush(30) == 0
    run()  # known: read by its offsets, no groups job
    assert [(s["batch"], s["fast"]) for s in seen[1:]] == [(1, True)]
    assert {(r[0], r[1], r[2]) for r in seen[1]["rows"]} == {(t, 0, 1)}
    assert '"t":{"value":"c"}' in next(iter(seen[1]["rows"]))[3]

    producer.produce(t, key=b"{}", value=_value(first, pk=5, t="d"), partition=1)
    producer.produce(t, key=b"{}", value=_value(altered, pk=6, t="e", n=7), partition=1)
    assert producer.flush(30) == 0
    run()  # the table was altered: the known schema's parse fails, the micro-batch is read again
    assert [(s["batch"], s["fast"], "rows" in s) for s in seen[2:]] == [(2, True, False), (2, False, True)]
    assert {(r[0], r[1], r[2]) for r in seen[3]["rows"]} == {(t, 1, 1), (t, 1, 2)}
    assert any('"n":{"value":7}' in r[3] for r in seen[3]["rows"])


def _envelopes(groups: list[Group]) -> set[tuple[str, int, int, str]]:
    found: set[tuple[str, int, int, str]] = set()
    for group in groups:
        if group.kind == "envelope":
            rows = group.frame.select("topic", "partition", "offset", F.to_json("env").alias("env")).collect()
            found |= {(r["topic"], r["partition"], r["offset"], r["env"]) for r in rows}
    return found
