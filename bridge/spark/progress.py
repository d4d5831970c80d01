"""One structured log line per micro-batch while a job runs (and catches up).

A `StreamingQueryListener` turns each query progress event into `micro-batch done` with the batch
id, input rows, rows/s (Spark's processedRowsPerSecond: rows over the batch's own duration), the
duration and the lag per source topic: the Kafka source's latest offsets minus the batch's end
offsets, summed over the topic's partitions (the records still to read when the batch ended).
"""

from __future__ import annotations

import json
import time
from typing import Any

import structlog
from pyspark.sql.streaming.listener import StreamingQueryListener

log = structlog.get_logger("bridge.spark.progress")
# (job, batch id) -> the micro-batch's records, told by a job that reads its source more than
# once per micro-batch (the mirror: once per table), where Spark's numInputRows counts every read.
_RECORDS: dict[tuple[str, int], int] = {}


def count_records(job: str, batch_id: int, records: int) -> None:
    _RECORDS[(job, batch_id)] = records


def lag_per_topic(latest: str | None, end: str | None) -> dict[str, int]:
    """Kafka source offsets as Spark prints them (`{"topic": {"0": 12, ...}}`) -> lag per topic."""
    if not latest or not end:
        return {}
    try:
        latest_offsets, end_offsets = json.loads(latest), json.loads(end)
    except ValueError:
        return {}  # not a Kafka source's offsets (or none yet)
    if not isinstance(latest_offsets, dict) or not isinstance(end_offsets, dict):
        return {}
    lag: dict[str, int] = {}
    for topic, partitions in latest_offsets.items():
        done = end_offsets.get(topic, {})
        lag[topic] = sum(max(0, int(offset) - int(done.get(partition, 0))) for partition, offset in partitions.items())
    return lag


def describe(progress: Any) -> dict[str, Any]:
    """The log fields of one StreamingQueryProgress."""
    lag: dict[str, int] = {}
    for source in progress.sources:
        lag.update(lag_per_topic(source.latestOffset, source.endOffset))
    duration_ms = (progress.durationMs or {}).get("triggerExecution", progress.batchDuration)
    rows, rate = progress.numInputRows, float(progress.processedRowsPerSecond or 0.0)
    counted = _RECORDS.pop((progress.name, progress.batchId), None)
    if counted is not None:
        rows, rate = counted, counted * 1000 / duration_ms if duration_ms else 0.0
    return {"job": progress.name, "batch_id": progress.batchId, "rows": rows, "rows_per_s": round(rate, 1),
            "duration_s": round(float(duration_ms or 0) / 1000, 3), "lag": lag}


class ProgressLogger(StreamingQueryListener):
    def __init__(self) -> None:
        self.last_batch = -1

    def drain(self, spark: Any, query: Any, timeout_s: float = 10.0, keep: bool = False) -> None:
        """After the query ended: wait until the last micro-batch's line is out (Spark's listener
        bus delivers events asynchronously), then unregister, so the JVM stops calling into this
        process while it exits (`keep`: stay registered for the session's next query)."""
        progress = query.lastProgress
        last = int(progress["batchId"]) if progress else -1
        deadline = time.monotonic() + timeout_s
        while self.last_batch < last and time.monotonic() < deadline:
            time.sleep(0.1)
        self.last_batch = -1  # batch ids start again at 0 in the next query's checkpoint
        if not keep:
            spark.streams.removeListener(self)

    def onQueryStarted(self, event: Any) -> None:
        log.info("query started", job=event.name, id=str(event.id))

    def onQueryProgress(self, event: Any) -> None:
        try:
            fields = describe(event.progress)
        except Exception as error:  # a log line must not fail the listener bus
            log.warning("micro-batch progress unreadable", error=str(error))
            return
        log.info("micro-batch done", **fields)
        self.last_batch = max(self.last_batch, int(fields["batch_id"]))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        log.info("query ended", id=str(event.id), failed=event.exception is not None)
