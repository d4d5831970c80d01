"""Partitions' watermarks, asked for again while a leader is being elected: one partition
through a Consumer (`watermarks`, the one-partition control and signals topics), or every
partition of a topic in one request through an AdminClient (`watermarks_of`).

A topic a worker has just created, or one whose leader's broker was restarted, answers 'Not leader
for partition', 'Unknown partition' or a timeout for a moment, though its partitions are already
published with a leader: every topic a worker reads to its end at start-up (offsets, control,
signals) asks through here, so that such a moment is waited out instead of ending start-up (a CI
run's worker exited on the control topic's 'Not leader for partition' a second after creating it).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin._listoffsets import OffsetSpec

RETRY_PAUSE_S = 0.2


def electing(error: KafkaException) -> bool:
    """A leader being elected, or metadata not yet refreshed after it (`_UNKNOWN_PARTITION`: seen
    after an outage and when two workers start on a fresh cluster)."""
    return bool(error.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                         KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT,
                                         KafkaError._UNKNOWN_PARTITION))


def watermarks(client: Any, topic: str, partition: int, deadline: float, *, absent_ok: bool = False) -> tuple[int, int]:
    """(low, high) of the partition through `client` (a Consumer). Retried until `deadline`
    (time.monotonic) while the error is retriable or a leader is being elected, asking for the
    topic's metadata before each retry rather than at the next periodic refresh; then the last
    KafkaException is raised. `absent_ok`: 'Unknown topic or partition' is raised at once (the
    caller reads an absent topic as an empty one)."""
    while True:
        try:
            low, high = client.get_watermark_offsets(TopicPartition(topic, partition),
                                                     timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            return int(low), int(high)
        except KafkaException as error:
            final = absent_ok and error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if final or time.monotonic() > deadline or not (error.args[0].retriable() or electing(error)):
                raise
            if electing(error):
                with contextlib.suppress(KafkaException):
                    client.list_topics(topic, timeout=2)
            time.sleep(RETRY_PAUSE_S)


def watermarks_of(admin: Any, topic: str, partitions: Sequence[int], deadline: float, *,
                  committed_only: bool = False) -> dict[int, tuple[int, int]]:
    """(low, high) of every partition of `partitions`, asked in one ListOffsets request per end
    (both sent at once) through `admin` (an AdminClient): a Consumer's get_watermark_offsets asks
    one partition per call, which took 13 s for the default 25-partition offsets topic (issue 42).
    `committed_only`: high is the last stable offset (records of open transactions do not count).
    Retried until `deadline` (time.monotonic) as `watermarks` is; then the last KafkaException
    is raised (a timeout as `_TIMED_OUT`)."""
    isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
    while True:
        timeout = max(0.5, min(5.0, deadline - time.monotonic()))
        try:
            return _ask_ends(admin, topic, partitions, isolation, timeout)
        except KafkaException as error:
            if time.monotonic() > deadline or not (error.args[0].retriable() or electing(error)):
                raise
            if electing(error):
                with contextlib.suppress(KafkaException):
                    admin.list_topics(topic, timeout=2)
            time.sleep(RETRY_PAUSE_S)


def _ask_ends(admin: Any, topic: str, partitions: Sequence[int], isolation: IsolationLevel,
              timeout: float) -> dict[int, tuple[int, int]]:
    asked = {}
    specs = (("low", OffsetSpec.earliest()), ("high", OffsetSpec.latest()))  # type: ignore[no-untyped-call]
    for end, spec in specs:
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                     isolation_level=isolation, request_timeout=timeout)
        asked[end] = {tp.partition: future for tp, future in futures.items()}
    try:
        return {p: (int(asked["low"][p].result(timeout + 1).offset), int(asked["high"][p].result(timeout + 1).offset))
                for p in partitions}
    except concurrent.futures.TimeoutError:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no offsets of {topic} in {timeout:.0f} s")) from None
