"""Topics the worker needs, created when missing: the slots topic, the compacted offsets topic
and one data topic per table (broker defaults for partitions and replication).

A topic that already exists is checked where a difference would lose or repeat data without a
word: the offsets topic must be compacted (with `delete` a group's position expires after
`retention.ms`, and the group starts again from the default start), and the slots topic must
have exactly `slots.count` partitions (every worker maps groups onto slots with `slots.count`:
with fewer partitions the groups of the missing slots are never read, and workers that disagree
on the count read some groups twice).

Workers that start together on a busy broker: a topic that this worker or another has just created
may be unknown to the broker that answers for a while (the controller has created it, the broker
has not published its partitions yet: on a loaded 2-core machine, a burst of about 1,100
partitions took over 20 s). `await_topics` waits for every topic the worker needs to be published
with a leader for each partition, within one start-up bound, `TOPICS_READY_BOUND_S`; only a topic
still not there at the bound is an error."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError

log = structlog.get_logger(__name__)
_NOT_ALLOWED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)
# Below the liveness bound (90 s, bridge/observability/health.py) with room for the rest of start-up.
TOPICS_READY_BOUND_S = 60.0
_UNDECIDED = (KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT)  # the controller may still create it


def ensure_topics(admin: AdminClient, wanted: list[NewTopic], timeout_s: float = 30.0) -> None:
    """Create the topics of `wanted` that do not exist; an existing one is left as it is."""
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as error:
        raise KafkaUnavailableError(f"Kafka did not answer: {error.args[0].str()}") from None
    missing = [topic for topic in wanted if topic.topic not in existing]
    if not missing:
        return
    for name, future in admin.create_topics(missing, request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("topic creation not confirmed in time; waiting for the topic", topic=name)
        except KafkaException as error:
            code = error.args[0].code()
            if code in _UNDECIDED:  # a busy controller: `await_topics` sees whether it came
                log.warning("topic creation not confirmed in time; waiting for the topic", topic=name,
                            error=error.args[0].str())
            elif code != KafkaError.TOPIC_ALREADY_EXISTS:  # another worker was quicker
                raise KafkaUnavailableError(f"cannot create topic {name}: {error.args[0].str()}") from None


def await_topics(admin: AdminClient, names: Iterable[str], bound_s: float = TOPICS_READY_BOUND_S) -> None:
    """Wait until the broker publishes every topic of `names` with a leader for each partition;
    raise KafkaUnavailableError naming the first one still missing at `bound_s`."""
    wanted = sorted(set(names))
    started = time.monotonic()
    next_note = started + 5.0
    while True:
        try:
            topics = admin.list_topics(timeout=max(1.0, min(10.0, started + bound_s - time.monotonic()))).topics
            waiting = {name: _unpublished(topics.get(name)) for name in wanted}
        except KafkaException as error:
            waiting = {name: f"Kafka did not answer: {error.args[0].str()}" for name in wanted}
        waiting = {name: reason for name, reason in waiting.items() if reason is not None}
        if not waiting:
            return
        now = time.monotonic()
        if now - started >= bound_s:
            name, reason = next(iter(waiting.items()))
            raise KafkaUnavailableError(f"topic {name} is not available {bound_s:.0f} s into start-up: {reason}")
        if now >= next_note:  # the broker is slow to publish new topics: say so, not once a turn
            log.warning("waiting for the broker to publish topics", topics=sorted(waiting),
                        waited_s=round(now - started), bound_s=bound_s)
            next_note = now + 5.0
        time.sleep(0.25)


def _unpublished(metadata: object) -> str | None:
    """Why a topic's metadata does not show it ready (None: ready)."""
    if metadata is None:
        return "no such topic"
    error = getattr(metadata, "error", None)
    if error is not None:
        return str(error)
    partitions = getattr(metadata, "partitions", {})
    if not partitions:
        return "no partitions yet"
    leaderless = [p for p, info in partitions.items() if info.error is not None or info.leader < 0]
    return f"partitions without a leader: {sorted(leaderless)[:5]}" if leaderless else None


def check_worker_topics(admin: AdminClient, *, offsets: str, slots: str, slots_count: int, name: str,
                        bootstrap: str, timeout_s: float = 30.0) -> None:
    """Raise KafkaSettingError (one line: the setting, the problem, the fix) when the offsets
    topic is not compacted or the slots topic's partitions differ from `slots.count`."""
    policy = topic_config(admin, offsets, "cleanup.policy", timeout_s)
    if policy is None:
        # Kafka Connect skips its own check the same way when the ACLs do not allow it.
        log.warning("cannot check the offsets topic's cleanup.policy: describing its configuration is not "
                    "allowed (DescribeConfigs); make sure it is cleanup.policy=compact", topic=offsets)
    elif policy != "compact":
        # Kafka Connect refuses its offsets topic the same way (`compact,delete` too: it expires).
        raise KafkaSettingError(
            "offset.storage.topic",
            f"topic {offsets} has cleanup.policy={policy}, but the offsets topic must be compacted only "
            f"(otherwise a group's position expires after retention.ms and the group starts again from "
            f"the default start); fix it with: kafka-configs.sh --bootstrap-server {bootstrap} --alter "
            f"--entity-type topics --entity-name {offsets} --add-config cleanup.policy=compact")
    partitions = partition_count(admin, slots, timeout_s)
    if partitions != slots_count:
        raise KafkaSettingError("slots.count", slots_mismatch(slots, partitions, slots_count, name, bootstrap))


def slots_mismatch(slots: str, partitions: int, slots_count: int, name: str, bootstrap: str) -> str:
    """The reason and the fix, for start-up and for a running worker that sees the topic change."""
    change = (f"kafka-topics.sh --bootstrap-server {bootstrap} --alter --topic {slots} --partitions {slots_count}"
              if partitions < slots_count else
              f"kafka-topics.sh --bootstrap-server {bootstrap} --delete --topic {slots} (it holds no records; "
              f"the next worker creates it with slots.count partitions)")
    return (f"{slots_count}, but the slots topic {slots} (slots.topic) has {partitions} partitions: every worker "
            f"maps groups onto slots.count slots, so a mismatch leaves groups unread or reads them twice; "
            f"set slots.count={partitions}, or stop every worker of {name!r}, run {change}, "
            f"and start them all with slots.count={slots_count}")


def topic_config(admin: AdminClient, topic: str, key: str, timeout_s: float) -> str | None:
    """The topic's value of `key`; None when the ACLs do not allow reading it. (ConfigResource and
    ResourceType come from their own modules: confluent_kafka.admin re-exports them untyped.)"""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout=timeout_s)
            break
        except KafkaException as error:
            code = error.args[0].code()
            if code in _NOT_ALLOWED:
                return None
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise KafkaUnavailableError(f"cannot read the configuration of topic {topic}: "
                                            f"{error.args[0].str()}") from None
            time.sleep(0.2)  # created a moment ago: not known to every broker yet
    entry = entries.get(key)
    return str(entry.value) if entry is not None else "?"


def partition_count(admin: AdminClient, topic: str, timeout_s: float) -> int:
    """Asked again while a topic created a moment ago is not in the brokers' metadata yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            metadata = admin.list_topics(topic, timeout=max(1.0, deadline - time.monotonic())).topics.get(topic)
        except KafkaException as error:
            raise KafkaUnavailableError(f"cannot read the metadata of topic {topic}: "
                                        f"{error.args[0].str()}") from None
        if metadata is not None and metadata.partitions:
            return len(metadata.partitions)
        if time.monotonic() > deadline:
            reason = "no such topic" if metadata is None else str(metadata.error or "no partitions")
            raise KafkaUnavailableError(f"topic {topic} is not available: {reason}")
        time.sleep(0.2)


def offsets_topic(name: str, partitions: int, replication_factor: int) -> NewTopic:
    return NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                    config={"cleanup.policy": "compact"})


def status_topic(name: str) -> NewTopic:
    return NewTopic(name, num_partitions=1, replication_factor=-1, config={"cleanup.policy": "compact"})


def control_topic(name: str) -> NewTopic:
    """Kafka Connect's config topic: one partition (every worker reads every record in order),
    compacted (the last target state and restart request per key are what counts)."""
    return NewTopic(name, num_partitions=1, replication_factor=-1, config={"cleanup.policy": "compact"})


def signals_topic(name: str) -> NewTopic:
    """One partition: every worker reads every signal, in order."""
    return NewTopic(name, num_partitions=1, replication_factor=-1)


def slots_topic(name: str, slots: int) -> NewTopic:
    return NewTopic(name, num_partitions=slots, replication_factor=-1)


def data_topic(name: str) -> NewTopic:
    return NewTopic(name, num_partitions=-1, replication_factor=-1)
