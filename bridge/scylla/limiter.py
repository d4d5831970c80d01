"""One bound on queries in flight for the whole process, shared by every group and by
discovery, so that catching up many groups at once cannot flood the cluster."""

from __future__ import annotations

import threading
from types import TracebackType


class InflightLimiter:
    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"in-flight limit must be > 0, got {limit}")
        self.limit = limit
        self._used = 0
        self._cond = threading.Condition()

    @property
    def in_flight(self) -> int:
        return self._used

    def take_up_to(self, wanted: int) -> int:
        """Take as many slots as are free, up to `wanted`, without waiting."""
        with self._cond:
            granted = max(0, min(wanted, self.limit - self._used))
            self._used += granted
            return granted

    def release(self, count: int = 1) -> None:
        with self._cond:
            self._used -= count
            if self._used < 0:
                raise RuntimeError("released more in-flight slots than were taken")
            self._cond.notify_all()

    def __enter__(self) -> InflightLimiter:
        with self._cond:
            while self._used >= self.limit:
                self._cond.wait()
            self._used += 1
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()
