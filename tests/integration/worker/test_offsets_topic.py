"""The offsets topic follower's hand-over barrier against a real broker: catching up waits for a
transaction that holds offsets records, and then shows its outcome; a report's catch-up
(`committed_only`) reads what is committed and does not wait."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

GROUP = GroupId("ks", "t", 1_700_000_000_000, "3")
FIRST, SECOND = Position.at(1_700_000_010_000_000), Position.at(1_700_000_020_000_000)


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_catch_up_waits_for_an_open_transaction_and_sees_its_outcome(
    outcome: str, kafka_bootstrap: str, make_topic: Callable[..., str], topic_name: str,
) -> None:
    topic = make_topic(topic_name, partitions=3, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}",
                         "partitioner": "murmur2_random"})
    producer.init_transactions(30)
    for position in (FIRST, SECOND):
        producer.begin_transaction()
        producer.produce(topic, encode_value(position), encode_key("conn", GROUP))
        if position is FIRST:
            producer.commit_transaction(30)
    assert producer.flush(30) == 0  # the second transaction's record is in the log, still open

    follower = OffsetsTopic({"bootstrap.servers": kafka_bootstrap}, topic, "conn")
    follower.start()
    done = threading.Event()
    caught_up = threading.Thread(target=lambda: (follower.catch_up(30), done.set()))
    caught_up.start()
    try:
        assert not done.wait(2.0), "caught up past a transaction that is still open"
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
        assert done.wait(20.0)
        assert follower.positions == {GROUP: SECOND if outcome == "commit" else FIRST}
    finally:
        caught_up.join(30)
        follower.close()


def test_catch_up_returns_at_once_when_nothing_is_open(
    kafka_bootstrap: str, make_topic: Callable[..., str], topic_name: str,
) -> None:
    topic = make_topic(topic_name, partitions=3, config={"cleanup.policy": "compact"})
    follower = OffsetsTopic({"bootstrap.servers": kafka_bootstrap}, topic, "conn")
    follower.start()
    started = time.monotonic()
    follower.catch_up(30)
    assert time.monotonic() - started < 5 and follower.positions == {}
    follower.close()


def test_a_reports_catch_up_reads_what_is_committed_without_waiting_for_an_open_transaction(
    kafka_bootstrap: str, make_topic: Callable[..., str], topic_name: str,
) -> None:
    topic = make_topic(topic_name, partitions=3, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}",
                         "partitioner": "murmur2_random"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, encode_value(FIRST), encode_key("conn", GROUP))
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, encode_value(SECOND), encode_key("conn", GROUP))
    assert producer.flush(30) == 0  # left open, as by a worker SIGKILLed mid-transaction
    follower = OffsetsTopic({"bootstrap.servers": kafka_bootstrap}, topic, "conn")
    try:
        follower.start()
        started = time.monotonic()
        follower.catch_up(30, committed_only=True)
        assert time.monotonic() - started < 5 and follower.positions == {GROUP: FIRST}
    finally:
        follower.close()
        producer.abort_transaction(30)
