"""The cluster's wall clock, as seen from this host. The confidence window is measured against
the times the cluster wrote into the log (`cdc$time`), so "now" must be the cluster's now: a
worker host whose clock runs ahead would otherwise read past rows not yet written and never read
them (a clock 20 s ahead lost three of four writes in tests/faults). The offset is measured with
`toUnixTimestamp(now())` from the node, taking the sample with the shortest round trip, and
measured again every minute by a thread of its own (reading the clock never waits on a query);
while the cluster does not answer, the last offset stands."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger(__name__)

_QUERY = "SELECT toUnixTimestamp(now()) AS now_ms FROM system.local"
_SAMPLES = 3
_REPORTED_ABOVE_S = 1.0  # below this, the difference is noise next to any confidence window


class ClusterClock:
    def __init__(self, session: Any, local: Callable[[], float] = time.time, every_s: float = 60.0,
                 timeout_s: float = 2.0) -> None:
        self._session, self._local, self._every_s, self._timeout_s = session, local, every_s, timeout_s
        self.offset_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-clock", daemon=True)

    def __call__(self) -> float:
        """Seconds since the epoch by the cluster's clock."""
        return self._local() + self.offset_s

    def start(self) -> None:
        """Measure now, then every `every_s` in the background."""
        self.sync()
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.sync()

    def sync(self) -> None:
        try:
            samples = [self._sample() for _ in range(_SAMPLES)]
        except Exception as error:  # any driver error: the cluster is away; the reader reports that
            log.debug("cluster clock not read; keeping the last offset", error=str(error))
            return
        round_trip, offset = min(samples)
        if abs(offset) >= _REPORTED_ABOVE_S and abs(offset - self.offset_s) >= _REPORTED_ABOVE_S:
            log.warning("this host's clock differs from the cluster's; reading by the cluster's",
                        offset_s=round(offset, 3), round_trip_ms=round(round_trip * 1000, 1))
        self.offset_s = offset

    def _sample(self) -> tuple[float, float]:
        """(round trip, cluster minus local), both in seconds."""
        before = self._local()
        row = self._session.execute(_QUERY, timeout=self._timeout_s).one()
        after = self._local()
        return after - before, row.now_ms / 1000 - (before + after) / 2
