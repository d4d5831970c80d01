"""When the worker commits and how long its threads' GIL slices are: the catch-up / caught-up
rules of bridge/worker/tuning.py (`Pace`) and bridge/worker/transaction_cycle.py (`due`). What
they buy is measured by bench/worker_bench.py (latency, catch-up)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.settings.load import build_config
from bridge.worker.transaction_cycle import TransactionCycle
from bridge.worker.tuning import (
    CATCHING_UP_EVENTS,
    CAUGHT_UP_AFTER_S,
    CAUGHT_UP_SWITCH_INTERVAL_S,
    SWITCH_INTERVAL_S,
    Pace,
)
from tests.unit.test_config import BASE


@pytest.fixture
def switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_pace_is_caught_up_after_a_second_of_small_polls_and_catching_up_at_the_first_big_one(
        switch_interval: None) -> None:
    clock = _Clock()
    pace = Pace(clock)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    pace.follow(10)
    assert pace.catching_up  # less than CAUGHT_UP_AFTER_S since start-up
    clock.now += CAUGHT_UP_AFTER_S
    pace.follow(0)
    assert not pace.catching_up
    assert sys.getswitchinterval() == pytest.approx(CAUGHT_UP_SWITCH_INTERVAL_S)
    pace.follow(CATCHING_UP_EVENTS - 1)
    assert not pace.catching_up
    pace.follow(CATCHING_UP_EVENTS)
    assert pace.catching_up
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    clock.now += CAUGHT_UP_AFTER_S / 2
    pace.follow(0)
    assert pace.catching_up  # a pause in a catch-up is not the end of it


class _Producer:
    """The part of a TransactionalProducer that `due` looks at."""

    def __init__(self) -> None:
        self.records_in_transaction = 0
        self.is_open = False

    def serve(self) -> None:
        pass

    def produce(self, topic: str, key: Any, value: Any) -> None:
        self.is_open = True
        self.records_in_transaction += 1


class _Keeper:
    def new(self) -> _Producer:
        return _Producer()


def _cycle() -> TransactionCycle:
    config = build_config({**BASE, "commit.interval.ms": "60000", "heartbeat.interval.ms": "60000"})
    cycle = TransactionCycle(config, _Keeper(), telemetry=None)  # type: ignore[arg-type]
    cycle.start()
    return cycle


def test_an_open_transaction_is_committed_as_soon_as_the_source_is_idle() -> None:
    cycle = _cycle()
    assert not cycle.due(idle=True)  # nothing to commit
    cycle.stage([("topic", b"k", b"v")], group=None, position=None)  # type: ignore[arg-type]
    assert not cycle.due()  # the interval is a minute and the batch far from full
    assert cycle.due(idle=True)
