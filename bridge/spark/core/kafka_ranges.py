"""One topic's records of a micro-batch read again from Kafka, by offset range.

Spark's Kafka source cannot narrow a re-read of a micro-batch to one topic: every action on the
micro-batch's frame fetches every topic's records, and a filter on `topic` drops the others only
after the fetch. The mirror reads a micro-batch of JSON with schemas several times (its schema
groups, then each table's changes, then the dropped changes) rather than caching it (docs/spark.md,
"Mirror over a big backlog"), so each table's read fetched the whole batch. Given the offsets of a
topic's records in the micro-batch (the schema groups' job finds them), this reads those offsets
alone, as a batch query with the stream's Kafka options.

Exact: the micro-batch holds, per source partition, every committed record of an offset range;
its records of the partition lie between the lowest and the highest offset found, so the
committed records from the lowest to the highest offset (read_committed, as the stream) are the
same records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

# Per source partition: (first offset, offset after the last), as Spark's `endingOffsets` takes them.
Ranges = dict[int, tuple[int, int]]


@dataclass(frozen=True)
class KafkaRanges:
    """Reads offset ranges of one topic with the stream's source options."""

    options: dict[str, str] = field(default_factory=dict)  # the Kafka source's reader options

    def read(self, spark: SparkSession, topic: str, ranges: Ranges) -> DataFrame:
        return self.read_topics(spark, {topic: ranges})

    def read_topics(self, spark: SparkSession, by_topic: dict[str, Ranges]) -> DataFrame:
        """The records of each topic's offset ranges, in one frame."""
        empty = sorted(topic for topic, ranges in by_topic.items() if not ranges)
        if not by_topic or empty:
            raise ValueError(f"topics {empty}: no offset range to read")
        assign = {topic: sorted(ranges) for topic, ranges in by_topic.items()}
        return (spark.read.format("kafka").options(**self.options)
                .option("assign", json.dumps(assign))
                .option("startingOffsets", json.dumps(_bounds(by_topic, 0)))
                .option("endingOffsets", json.dumps(_bounds(by_topic, 1)))
                .load())


def _bounds(by_topic: dict[str, Ranges], end: int) -> dict[str, dict[str, int]]:
    """Spark's `startingOffsets` (`end` 0) or `endingOffsets` (1) of the ranges."""
    return {topic: {str(p): ranges[p][end] for p in sorted(ranges)} for topic, ranges in by_topic.items()}
