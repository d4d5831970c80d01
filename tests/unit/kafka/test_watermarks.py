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


class _Answered:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class AdminAnsweringAfter:
    """An AdminClient whose ListOffsets requests fail with `errors` (in order), then answer
    low 3 / high 9 for every partition asked, all partitions in one request."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.requests: list[int] = []

    def list_offsets(self, asked: dict[TopicPartition, object], **_: object) -> dict[TopicPartition, object]:
        import concurrent.futures

        self.requests.append(len(asked))
        answers = {}
        error = KafkaException(KafkaError(self.errors.pop(0))) if self.errors else None
        for tp, spec in asked.items():
            future: concurrent.futures.Future[_Answered] = concurrent.futures.Future()
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(_Answered(9 if "Latest" in type(spec).__name__ else 3))
            answers[tp] = future
        return answers

    def list_topics(self, topic: str, timeout: float) -> None:
        pass


def test_every_partition_is_asked_in_one_request_per_end() -> None:
    admin = AdminAnsweringAfter()
    assert module.watermarks_of(admin, "t-offsets", range(25), time.monotonic() + 10) == {p: (3, 9) for p in range(25)}
    assert admin.requests == [25, 25]


def test_a_batch_is_asked_again_while_a_leader_is_elected_and_not_after_a_refusal() -> None:
    admin = AdminAnsweringAfter(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert module.watermarks_of(admin, "t-offsets", [0, 1], time.monotonic() + 10)[1] == (3, 9)
    with pytest.raises(KafkaException):
        module.watermarks_of(AdminAnsweringAfter(KafkaError.TOPIC_AUTHORIZATION_FAILED), "t", [0],
                             time.monotonic() + 10)
