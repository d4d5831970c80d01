"""A partition's watermarks, asked for again while its leader is being elected.

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
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # exported, missing from the stubs

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


def all_watermarks(admin: Any, topic: str, partitions: list[int], deadline: float, *,
                   committed_only: bool = False) -> dict[int, tuple[int, int]]:
    """(low, high) of every partition of `topic` through `admin` (an AdminClient), in one round
    trip: two ListOffsets requests (earliest, latest) sent together, one per partition leader.
    Asking a consumer one partition after another is no substitute: a consumer that fetches the
    topic answers each query only after its fetch's long poll (fetch.wait.max.ms, 500 ms), so the
    offsets topic's 25 default partitions took 11-13 s (issue 42). `committed_only`: high is the
    last stable offset (read_committed), else the high watermark (open transactions count).
    Retried like `watermarks` until `deadline`, then the last KafkaException is raised."""
    isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
    while True:
        timeout = max(0.5, min(10.0, deadline - time.monotonic()))
        try:
            return _list_offsets(admin, topic, partitions, isolation, timeout)
        except KafkaException as error:
            if time.monotonic() > deadline or not (error.args[0].retriable() or electing(error)):
                raise
            with contextlib.suppress(KafkaException):
                admin.list_topics(topic, timeout=2)
            time.sleep(RETRY_PAUSE_S)


def _list_offsets(admin: Any, topic: str, partitions: list[int], isolation: IsolationLevel,
                  timeout: float) -> dict[int, tuple[int, int]]:
    offset_spec: Any = OffsetSpec  # untyped in the stubs
    specs: dict[str, Any] = {"low": offset_spec.earliest(), "high": offset_spec.latest()}
    asked = {name: admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                      isolation_level=isolation, request_timeout=timeout)
             for name, spec in specs.items()}
    found: dict[str, dict[int, int]] = {"low": {}, "high": {}}
    for name, futures in asked.items():
        for partition, future in futures.items():
            try:
                found[name][partition.partition] = int(future.result(timeout + 5).offset)
            except concurrent.futures.TimeoutError:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"ListOffsets not answered in {timeout:.0f} s",
                                                retriable=True)) from None
    return {p: (found["low"][p], found["high"][p]) for p in partitions}
