"""The Kafka offsets a streaming micro-batch covers, read from its plan on the driver, no Spark job.

A `foreachBatch` function gets the micro-batch as a frame over the Kafka source's RDD; each of its
partitions holds a `KafkaBatchInputPartition` whose `KafkaOffsetRange` says which topic partition
and which offsets it reads. Knowing them, a job reads each topic's records once, by its own
offsets (`kafka_ranges`), instead of first running a job over the whole micro-batch to find which
topics it holds. This walks Spark's internals through py4j: any change there makes it answer
None, and the caller then finds the topics with a job, as before.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from bridge.spark.core.kafka_ranges import Ranges


def batch_ranges(batch: DataFrame) -> dict[str, Ranges] | None:
    """Per topic, per partition: (first offset, offset after the last) of the micro-batch's
    non-empty ranges; None when the frame is not a Kafka source's micro-batch read as expected."""
    try:
        rdd = _source_rdd(batch._jdf.queryExecution().logical())  # noqa: SLF001
        if rdd is None:
            return None
        found: dict[str, Ranges] = {}
        for partition in rdd.partitions():
            chosen = partition.inputPartition()
            if chosen.isEmpty():
                continue
            offsets = chosen.get().offsetRange()
            topic, number = str(offsets.topicPartition().topic()), int(offsets.topicPartition().partition())
            low, high = int(offsets.fromOffset()), int(offsets.untilOffset())
            if high <= low:
                continue
            known = found.setdefault(topic, {}).get(number, (low, high))
            found[topic][number] = (min(known[0], low), max(known[1], high))
        return found
    except Exception:  # Spark's internals differ from what this expects (see the module's docstring)
        return None


def _source_rdd(plan: Any) -> Any:
    """The Kafka source's `DataSourceRDD` under a micro-batch's `LogicalRDD`, None if elsewhere."""
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return None
    rdd = plan.rdd()
    while rdd.getClass().getSimpleName() != "DataSourceRDD":
        dependencies = rdd.dependencies()
        if dependencies.size() != 1:
            return None
        rdd = dependencies.apply(0).rdd()
    return rdd


def offsets_in(ranges: dict[str, Ranges]) -> int:
    """The offsets the ranges cover: their records, and the transaction markers between them."""
    return sum(high - low for partitions in ranges.values() for low, high in partitions.values())
