"""The window planner: which `[start, end)` of `cdc$time` a group reads next, and when.

Pure code; all times are microseconds. Rules:
- a window never ends after `now - confidence window` nor after the group's end (the next
  generation's start, or a closed tablet stream's close timestamp);
- when the group is behind, the window is as large as the adaptive size allows and is read at
  once (subject to the minimal wait between windows);
- when it is caught up, the window runs up to `now - confidence` as soon as at least one poll
  interval of new time has passed the confidence window, so the delay from write to record is
  the confidence window plus at most one poll interval plus the query time. The poll interval
  is short (`busy_poll_interval_ms`) after a window that had rows and doubles with each empty
  one up to `poll_interval_ms`: busy groups are read soon after their rows become safe, idle
  ones cost few queries.
- the adaptive size doubles after a full-size window that returned few rows (grows eightfold
  after an empty one) and halves after one that returned many: large windows skip empty
  history fast, small ones bound the work of one window.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.scylla.settings import ReaderSettings

MS = 1000
_EMPTY_GROWTH = 8


@dataclass(frozen=True, slots=True)
class Window:
    start_us: int
    end_us: int


@dataclass(frozen=True, slots=True)
class WaitUntil:
    micros: int


@dataclass(frozen=True, slots=True)
class GroupEnded:
    pass


Plan = Window | WaitUntil | GroupEnded


class WindowPlanner:
    def __init__(self, settings: ReaderSettings) -> None:
        self._confidence = settings.confidence_window_size_ms * MS
        self._idle_poll = settings.poll_interval_ms * MS
        self._busy_poll = min(settings.busy_poll_interval_ms * MS, self._idle_poll)
        self._poll = self._idle_poll
        self._minimal_wait = settings.minimal_wait_for_window_time_ms * MS
        self._min_size = settings.min_window_size_ms * MS
        self._max_size = settings.max_window_size_ms * MS
        self._target_rows = settings.target_rows_per_window
        self.size_us = min(max(settings.query_time_window_size_ms * MS, self._min_size), self._max_size)

    def safe_end(self, now_us: int) -> int:
        """The newest `cdc$time` (exclusive) that may be read at `now_us`."""
        return now_us - self._confidence

    def plan(
        self,
        start_us: int,
        end_bound_us: int | None,
        now_us: int,
        last_read_us: int | None = None,
        horizon_us: int | None = None,
    ) -> Plan:
        """The next window from `start_us`, given the group's end (None while unknown), when
        its previous window was started (for the minimal wait) and the metadata horizon (the
        time up to which stream metadata is known: no window may pass a switch not yet seen)."""
        if end_bound_us is not None and start_us >= end_bound_us:
            return GroupEnded()
        target = start_us + self.size_us
        if end_bound_us is not None:
            target = min(target, end_bound_us)
        earliest_end = min(start_us + self._poll, target)
        safe = self.safe_end(now_us)
        if horizon_us is not None and horizon_us < safe:
            safe = horizon_us
            if safe < earliest_end:
                return WaitUntil(now_us + self._poll)
        if safe < earliest_end:
            return WaitUntil(earliest_end + self._confidence)
        if last_read_us is not None and now_us < last_read_us + self._minimal_wait:
            return WaitUntil(last_read_us + self._minimal_wait)
        return Window(start_us, min(target, safe))

    def record_result(self, window: Window, rows: int) -> None:
        """Adapt the size and the poll interval to what a window returned."""
        self._poll = self._busy_poll if rows else min(self._poll * 2, self._idle_poll)
        full = window.end_us - window.start_us >= self.size_us
        if rows > self._target_rows:
            self.size_us = max(self.size_us // 2, self._min_size)
        elif full and rows * 2 < self._target_rows:
            # An empty window costs a query per stream and finds nothing: skip empty history
            # (the lookback before the first change) in a few large steps, not one doubling at
            # a time. A window that then finds many rows halves the size again.
            growth = _EMPTY_GROWTH if rows == 0 else 2
            self.size_us = min(self.size_us * growth, self._max_size)
