"""`core.known_schemas` over real Kafka micro-batches: a topic's offsets come from the micro-batch's
plan, a topic's schema is learnt from its first records, a known schema parses each micro-batch
without the groups job, and a schema change (the table altered, or a first micro-batch holding
two schemas) is caught and read again the slow way, with every record parsed once."""

from __future__ import annotations

import tempfile
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bridge.spark.core.batch_offsets import batch_ranges
from bridge.spark.core.decode import Group
from bridge.spark.core.kafka_ranges import KafkaRanges
from bridge.spark.core.known_schemas import KnownSchemas
from tests.spark.test_mirror_groups import _value
from tests.unit.envelope.support import make_table


def test_known_schemas_learnt_from_first_records_and_a_schema_change_is_read_again(
        spark: Any, kafka_bootstrap: str, make_topic: Any, topic_name: str) -> None:
    from confluent_kafka import Producer

    first = make_table(partition=[("pk", "int")], regular=[("t", "text")])
    altered = make_table(partition=[("pk", "int")], regular=[("t", "text"), ("n", "int")])
    t, u = make_topic(f"{topic_name}.ks.t", partitions=2), make_topic(f"{topic_name}.ks.u")
    w = make_topic(f"{topic_name}.ks.w")
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
            groups = known.groups(batch, batch_ranges(batch))
            attempt: dict[str, Any] = {"batch": batch_id, "slow": known.found_slowly, "ranges": batch_ranges(batch)}
            seen.append(attempt)
            attempt["rows"] = _envelopes(groups)  # a schema that is not the known one fails here
            return attempt["rows"]  # type: ignore[no-any-return]

        known.retried(read)

    def run() -> None:
        query = (spark.readStream.format("kafka").options(**options).option("subscribe", f"{t},{u},{w}")
                 .option("startingOffsets", "earliest").load().writeStream.foreachBatch(micro_batch)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()

    checkpoint = tempfile.mkdtemp(prefix="known-schemas-")
    run()  # the first micro-batch: each topic's schema learnt from its first records, no groups job
    assert [(s["batch"], s["slow"]) for s in seen] == [(0, [])]
    assert seen[0]["ranges"] == {t: {0: (0, 1), 1: (0, 1)}, u: {0: (0, 1)}}
    assert {(r[0], r[1], r[2]) for r in seen[0]["rows"]} == {(t, 0, 0), (t, 1, 0), (u, 0, 0)}
    assert batch_ranges(spark.range(1)) is None  # not a Kafka micro-batch: the caller finds its groups by a job

    producer.produce(t, key=b"{}", value=_value(first, pk=4, t="c"), partition=0)
    producer.produce(u, key=b"{}", value=None, partition=0)  # a tombstone: not an envelope, skipped
    # a new topic whose first record's schema is not the only one of its micro-batch
    producer.produce(w, key=b"{}", value=_value(first, pk=8, t="f"), partition=0)
    producer.produce(w, key=b"{}", value=_value(altered, pk=9, t="g", n=10), partition=0)
    assert producer.flush(30) == 0
    run()  # t and u known; w learnt from its first record, which the second contradicts: w read again
    assert [(s["batch"], s["slow"], "rows" in s) for s in seen[1:]] == [(1, [], False), (1, [w], True)]
    assert {(r[0], r[1], r[2]) for r in seen[2]["rows"]} == {(t, 0, 1), (w, 0, 0), (w, 0, 1)}
    assert any('"t":{"value":"c"}' in r[3] for r in seen[2]["rows"])
    assert any('"n":{"value":10}' in r[3] for r in seen[2]["rows"])

    producer.produce(t, key=b"{}", value=_value(first, pk=5, t="d"), partition=1)
    assert producer.flush(30) == 0
    run()  # t known: read by its offsets, no groups job
    assert [(s["batch"], s["slow"]) for s in seen[3:]] == [(2, [])]
    assert {(r[0], r[1], r[2]) for r in seen[3]["rows"]} == {(t, 1, 1)}

    producer.produce(t, key=b"{}", value=_value(first, pk=6, t="e"), partition=1)
    producer.produce(t, key=b"{}", value=_value(altered, pk=7, t="e", n=7), partition=1)
    assert producer.flush(30) == 0
    run()  # the table was altered: the known schema's parse fails, t is found the slow way
    assert [(s["batch"], s["slow"], "rows" in s) for s in seen[4:]] == [(3, [], False), (3, [t], True)]
    assert {(r[0], r[1], r[2]) for r in seen[5]["rows"]} == {(t, 1, 2), (t, 1, 3)}
    assert any('"n":{"value":7}' in r[3] for r in seen[5]["rows"])


def _envelopes(groups: list[Group]) -> set[tuple[str, int, int, str]]:
    found: set[tuple[str, int, int, str]] = set()
    for group in groups:
        if group.kind == "envelope":
            rows = group.frame.select("topic", "partition", "offset", F.to_json("env").alias("env")).collect()
            found |= {(r["topic"], r["partition"], r["offset"], r["env"]) for r in rows}
    return found
