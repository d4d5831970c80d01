"""Watermarks asked for again while a leader is being elected, and only then."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from bridge.kafka import watermarks as module
from bridge.kafka.watermarks import watermarks


class AnsweringAfter:
    """A consumer whose watermark queries fail with `errors` (in order), then answer (3, 9)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked = 0
        self.metadata_asked = 0

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 3, 9

    def list_topics(self, topic: str, timeout: float) -> None:
        self.metadata_asked += 1


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "RETRY_PAUSE_S", 0.0)


def test_a_leader_election_is_waited_out_with_fresh_metadata() -> None:
    client = AnsweringAfter(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._UNKNOWN_PARTITION,
                            KafkaError.LEADER_NOT_AVAILABLE)
    assert watermarks(client, "t-config", 0, time.monotonic() + 10) == (3, 9)
    assert (client.asked, client.metadata_asked) == (4, 3)


def test_the_last_error_is_raised_at_the_deadline() -> None:
    client = AnsweringAfter(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException) as raised:
        watermarks(client, "t-config", 0, time.monotonic() - 1)
    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION and client.asked == 1


def test_a_final_error_or_an_absent_topic_the_caller_accepts_is_raised_at_once() -> None:
    for error, absent_ok in ((KafkaError.TOPIC_AUTHORIZATION_FAILED, False), (KafkaError.UNKNOWN_TOPIC_OR_PART, True)):
        client = AnsweringAfter(error)
        with pytest.raises(KafkaException):
            watermarks(client, "t-config", 0, time.monotonic() + 10, absent_ok=absent_ok)
        assert client.asked == 1
    assert watermarks(AnsweringAfter(KafkaError.UNKNOWN_TOPIC_OR_PART), "t", 0, time.monotonic() + 10) == (3, 9)
