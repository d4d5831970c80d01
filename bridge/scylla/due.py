"""Which group readers the source's scheduler looks at in its next turn.

Those with news (an answer arrived, the group started), in arrival order so that no group waits
behind the others; those whose own wake-up time has come; and every reader once per sweep, a
safety net for changes that make a reader ready without news of its own (a predecessor finished,
discovery moved the horizon). Looking only at these keeps a turn proportional to the news, not
to the number of groups: scanning hundreds of readers on every answer was most of the reader
thread's CPU in the catch-up profile (bench/worker_bench.py --profile).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable

from bridge.scylla.groups import GroupId


class DueReaders:
    def __init__(self, sweep_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._sweep_s = sweep_s
        self._clock = clock
        self._due: dict[GroupId, None] = {}  # insertion-ordered: first come, first looked at
        self._timers: list[tuple[int, int, GroupId]] = []
        self._order = itertools.count()  # ties in the heap, GroupIds are not ordered
        self._next_sweep = 0.0

    def mark(self, group: GroupId) -> None:
        """Look at `group` in the next turn, after those already waiting."""
        self._due.pop(group, None)
        self._due[group] = None

    def wake(self, group: GroupId, at_us: int) -> None:
        heapq.heappush(self._timers, (at_us, next(self._order), group))

    def sweep_soon(self) -> None:
        self._next_sweep = 0.0

    def seen(self, group: GroupId) -> None:
        """`group` was looked at; it comes back when marked, woken or swept."""
        self._due.pop(group, None)

    def take(self, now_us: int, groups: Iterable[GroupId]) -> list[GroupId]:
        """The groups to look at now, in order; `groups` are all readers, for a sweep."""
        while self._timers and self._timers[0][0] <= now_us:
            self.mark(heapq.heappop(self._timers)[2])
        if self._clock() >= self._next_sweep:
            self._next_sweep = self._clock() + self._sweep_s
            for group in groups:
                self._due.setdefault(group, None)
        return list(self._due)

    def any_due(self) -> bool:
        return bool(self._due)

    def seconds_to_next(self, now_us: int) -> float:
        """Until the next timer or sweep (0 when one is already due)."""
        until = self._next_sweep - self._clock()
        if self._timers:
            until = min(until, (self._timers[0][0] - now_us) / 1_000_000)
        return max(0.0, until)
