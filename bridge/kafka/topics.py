"""Topics the worker needs, created when missing: the slots topic, the compacted offsets topic
and one data topic per table (broker defaults for partitions and replication)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bridge.kafka.errors import KafkaUnavailableError


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
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another worker was quicker
                raise KafkaUnavailableError(f"cannot create topic {name}: {error.args[0].str()}") from None


def offsets_topic(name: str, partitions: int, replication_factor: int) -> NewTopic:
    return NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                    config={"cleanup.policy": "compact"})


def slots_topic(name: str, slots: int) -> NewTopic:
    return NewTopic(name, num_partitions=slots, replication_factor=-1)


def data_topic(name: str) -> NewTopic:
    return NewTopic(name, num_partitions=-1, replication_factor=-1)
