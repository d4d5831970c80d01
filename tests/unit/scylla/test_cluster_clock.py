"""The cluster clock: the offset comes from the sample with the shortest round trip, and a
cluster that does not answer leaves the last offset in place."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bridge.scylla.cluster_clock import ClusterClock

pytestmark = pytest.mark.unit


class FakeSession:
    """Answers `now()` from a cluster clock `ahead_s` ahead of the local one; each query takes
    the next of `round_trips` local seconds, the answer read half-way through."""

    def __init__(self, ahead_s: float, round_trips: list[float]) -> None:
        self.ahead_s, self.round_trips = ahead_s, round_trips
        self.now = 1_000.0
        self.failing = False

    def clock(self) -> float:
        return self.now

    def execute(self, query: str, timeout: float) -> SimpleNamespace:
        if self.failing:
            raise OSError("no host")
        trip = self.round_trips.pop(0)
        self.now += trip / 2
        answer = SimpleNamespace(now_ms=int((self.now + self.ahead_s) * 1000))
        self.now += trip / 2
        return SimpleNamespace(one=lambda: answer)


def test_the_offset_is_the_clusters_lead_measured_by_the_quickest_sample() -> None:
    session = FakeSession(ahead_s=-20.0, round_trips=[0.5, 0.002, 0.3])
    clock = ClusterClock(session, local=session.clock)
    clock.sync()
    assert clock.offset_s == pytest.approx(-20.0, abs=0.002)
    assert clock() == pytest.approx(session.now - 20.0, abs=0.002)


def test_a_cluster_that_does_not_answer_leaves_the_last_offset() -> None:
    session = FakeSession(ahead_s=5.0, round_trips=[0.001] * 3)
    clock = ClusterClock(session, local=session.clock)
    clock.sync()
    session.failing = True
    clock.sync()
    assert clock.offset_s == pytest.approx(5.0, abs=0.002)
