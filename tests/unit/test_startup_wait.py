"""Start-up retries an unavailable dependency with back-off up to its bound, one log line per
attempt, keeps liveness and drops readiness meanwhile; anything else passes through at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import structlog

from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError
from bridge.observability.health import Health
from bridge.worker.startup_wait import wait_out


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _away(error: BaseException) -> bool:
    return isinstance(error, KafkaUnavailableError)


def _failing(times: int, error: Exception, clock: Clock,
             spent_s: float = 0.0) -> tuple[list[float], Callable[[float], str]]:
    remaining: list[float] = []

    def attempt(remaining_s: float) -> str:
        remaining.append(remaining_s)
        clock.now += spent_s
        if len(remaining) <= times:
            raise error
        return "up"

    return remaining, attempt


def test_an_unavailable_kafka_is_retried_with_back_off_and_one_line_per_attempt() -> None:
    clock, health = Clock(), Health()
    remaining, attempt = _failing(4, KafkaUnavailableError("Kafka did not answer"), clock)
    with structlog.testing.capture_logs() as logs:
        assert wait_out("Kafka", attempt, 300, unavailable=_away, health=health,
                        sleep=clock.sleep, clock=lambda: clock.now) == "up"
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]
    waiting = [line for line in logs if line["event"] == "start-up waiting"]
    assert [line["attempt"] for line in waiting] == [1, 2, 3, 4]
    assert waiting[0]["setting"] == "startup.timeout.ms" and "did not answer" in waiting[0]["error"]
    assert remaining[-1] == pytest.approx(300 - 15)
    ready, reason = health.readiness()
    assert not ready and reason.startswith("waiting for Kafka") and health.liveness()[0]


def test_the_bound_ends_the_wait_with_the_last_error() -> None:
    clock = Clock()
    _remaining, attempt = _failing(10**6, KafkaUnavailableError("no answer"), clock, spent_s=15)
    with structlog.testing.capture_logs() as logs, pytest.raises(KafkaUnavailableError, match="no answer"):
        wait_out("Kafka", attempt, 120, unavailable=_away, sleep=clock.sleep,
                 clock=lambda: clock.now)
    assert clock.now <= 120 + 15 and max(clock.slept) <= 30
    assert logs[-1]["event"] == "start-up gave up waiting"


def test_a_configuration_error_passes_through_at_once() -> None:
    clock = Clock()
    remaining, attempt = _failing(1, KafkaSettingError("kafka.sasl.password", "refused"), clock)
    with pytest.raises(KafkaSettingError):
        wait_out("Kafka", attempt, 300, unavailable=_away, sleep=clock.sleep,
                 clock=lambda: clock.now)
    assert len(remaining) == 1 and clock.slept == []
