"""Catch-up progress: how much log is left, how fast it shrinks, and when it will be done.

`CatchUp` is pure arithmetic over samples of (time, backlog, records produced): the backlog is
the largest lag of the groups being read (the log time the slowest group still has to read),
its shrink rate is measured over the last `window_s` seconds, and the ETA is backlog / shrink
rate. `ProgressLine` draws one line on a terminal (stderr) while the backlog is above
`threshold_s`, and clears it before any log line is printed.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TextIO

CATCHING_UP_S = 10.0  # a backlog above this is catching up; below it the worker keeps pace


@dataclass
class CatchUp:
    window_s: float = 30.0
    _samples: deque[tuple[float, float, int]] = field(default_factory=deque)

    def add(self, now_s: float, backlog_s: float, records: int) -> None:
        self._samples.append((now_s, max(0.0, backlog_s), records))
        while len(self._samples) > 2 and now_s - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    @property
    def backlog_s(self) -> float:
        return self._samples[-1][1] if self._samples else 0.0

    def records_per_s(self) -> float | None:
        span = self._span()
        if span is None:
            return None
        (t0, _, r0), (t1, _, r1) = span
        return (r1 - r0) / (t1 - t0)

    def shrink_per_s(self) -> float | None:
        """Seconds of backlog gone per second of wall time (above 0: catching up)."""
        span = self._span()
        if span is None:
            return None
        (t0, b0, _), (t1, b1, _) = span
        return (b0 - b1) / (t1 - t0)

    def eta_s(self) -> float | None:
        shrink = self.shrink_per_s()
        if shrink is None or shrink <= 0:
            return None
        return self.backlog_s / shrink

    def _span(self) -> tuple[tuple[float, float, int], tuple[float, float, int]] | None:
        if len(self._samples) < 2 or self._samples[-1][0] <= self._samples[0][0]:
            return None
        return self._samples[0], self._samples[-1]


def duration(seconds: float | None) -> str:
    """`3h12m`, `4m05s`, `12s`; `?` when unknown."""
    if seconds is None:
        return "?"
    total = round(seconds)
    if total >= 86_400:
        return f"{total // 86_400}d{total % 86_400 // 3600:02d}h"
    if total >= 3600:
        return f"{total // 3600}h{total % 3600 // 60:02d}m"
    if total >= 60:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total}s"


def progress_text(catch_up: CatchUp, groups: int) -> str:
    rate = catch_up.records_per_s()
    shrink = catch_up.shrink_per_s()
    parts = [f"catching up: {duration(catch_up.backlog_s)} of log behind ({groups} groups)"]
    parts.append("? records/s" if rate is None else f"{rate:,.0f} records/s")
    if shrink is not None and shrink > 0:
        parts.append(f"reading {shrink + 1:.1f}x real time")
    eta = catch_up.eta_s()
    parts.append(f"ETA {duration(eta)}" if eta is not None else "ETA ? (not gaining)")
    return ", ".join(parts)


class ProgressLine:
    """One self-overwriting line on a terminal; does nothing when `file` is not one."""

    def __init__(self, file: TextIO | None = None, threshold_s: float = CATCHING_UP_S) -> None:
        self._file = file if file is not None else sys.stderr
        self.enabled = self._file.isatty()
        self.threshold_s = threshold_s
        self._shown = ""
        self._lock = threading.Lock()

    def update(self, catch_up: CatchUp, groups: int) -> None:
        if not self.enabled:
            return
        text = progress_text(catch_up, groups) if catch_up.backlog_s > self.threshold_s else ""
        with self._lock:
            if text != self._shown:
                self._file.write("\r\033[K" + text)
                self._file.flush()
                self._shown = text

    def clear(self) -> None:
        """Step aside for a log line (the next `update` draws the line again)."""
        if not self.enabled:
            return
        with self._lock:
            if self._shown:
                self._file.write("\r\033[K")
                self._file.flush()
                self._shown = ""
