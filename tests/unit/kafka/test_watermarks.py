"""Watermarks asked for again while a leader is being elected, and only then."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from bridge.kafka import watermarks as module
from bridge.kafka.watermarks import all_watermarks, watermarks


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


class Future:
    def __init__(self, offset: int | None, error: int | None) -> None:
        self.offset, self.error = offset, error

    def result(self, timeout: float) -> Future:
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))
        return self


class Admin:
    """An AdminClient whose ListOffsets fail with `errors` (in order), then answer every
    partition: earliest 3, latest 9 + the partition."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.requests: list[dict[TopicPartition, object]] = []
        self.metadata_asked = 0

    def list_offsets(self, asked: dict[TopicPartition, object], isolation_level: object,
                     request_timeout: float) -> dict[TopicPartition, Future]:
        self.requests.append(asked)
        error = self.errors.pop(0) if self.errors else None
        latest = "Latest" in type(next(iter(asked.values()))).__name__
        return {tp: Future(9 + tp.partition if latest else 3, error) for tp in asked}

    def list_topics(self, topic: str, timeout: float) -> None:
        self.metadata_asked += 1


def test_every_partition_is_asked_for_in_one_round_trip() -> None:
    admin = Admin()
    assert all_watermarks(admin, "t-offsets", list(range(25)), time.monotonic() + 10) == {
        p: (3, 9 + p) for p in range(25)}
    assert len(admin.requests) == 2 and all(len(asked) == 25 for asked in admin.requests)


def test_the_batch_is_asked_again_while_a_leader_is_elected_and_a_final_error_is_raised_at_once() -> None:
    admin = Admin(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NOT_LEADER_FOR_PARTITION)
    assert all_watermarks(admin, "t", [0, 1], time.monotonic() + 10) == {0: (3, 9), 1: (3, 10)}
    assert admin.metadata_asked == 1
    refused = Admin(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        all_watermarks(refused, "t", [0], time.monotonic() + 10)
    assert len(refused.requests) == 2 and refused.metadata_asked == 0
