"""Liveness and readiness of one worker, as `/healthz` and `/readyz` answer them.

Live: the main loop has turned within `loop_bound_s`. The loop turns every few milliseconds;
the longest legitimate stalls are bounded Kafka calls (a commit waits up to 30 s for the
brokers, an assignment up to 60 s for the offsets topic), so the bound sits above them: a
probe that fails means the loop is stuck, not busy.

Ready: every gate holds (joined the slot group and serving its assignment, producer
initialised, Kafka reachable). Each change of readiness is one log line, never one per probe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

log = structlog.get_logger(__name__)
LOOP_BOUND_S = 90.0


class Health:
    def __init__(
        self,
        loop_bound_s: float = LOOP_BOUND_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_ready: Callable[[bool], object] | None = None,
    ) -> None:
        self.loop_bound_s = loop_bound_s
        self._clock = clock
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._last_beat = clock()  # start-up counts as a turn: the probe must not fail before the loop runs
        self._ready = False
        self._reason = "starting"

    def beat(self) -> None:
        """The main loop turned (called once per turn: one float store)."""
        self._last_beat = self._clock()

    def set_ready(self, ready: bool, reason: str = "") -> None:
        with self._lock:
            changed = ready != self._ready or (not ready and reason != self._reason)
            self._ready, self._reason = ready, ("ready" if ready else reason or "not ready")
        if changed:
            if ready:
                log.info("worker ready")
            else:
                log.warning("worker not ready", reason=self._reason)
            if self._on_ready is not None:
                self._on_ready(ready)

    def liveness(self) -> tuple[bool, str]:
        since = self._clock() - self._last_beat
        if since <= self.loop_bound_s:
            return True, f"main loop turned {since:.1f} s ago"
        return False, f"main loop stalled: last turn {since:.1f} s ago (bound {self.loop_bound_s:.0f} s)"

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            return self._ready, self._reason


class ReadinessGates:
    """Named conditions that must all hold; pushes the combined state to a `Health`.
    The reason given when not ready is the first failing gate's (in declaration order)."""

    def __init__(self, health: Health, gates: Sequence[str], initially_ok: Sequence[str] = ()) -> None:
        self._health = health
        self._order = list(gates)
        self._state: dict[str, tuple[bool, str]] = {
            gate: (gate in initially_ok, f"{gate}: not yet") for gate in gates}
        self._lock = threading.Lock()
        self._push()

    def set(self, gate: str, ok: bool, reason: str = "") -> None:
        if gate not in self._state:
            raise KeyError(gate)
        with self._lock:
            self._state[gate] = (ok, reason or f"{gate}: {'ok' if ok else 'not ok'}")
        self._push()

    def _push(self) -> None:
        with self._lock:
            failing = [self._state[g][1] for g in self._order if not self._state[g][0]]
        self._health.set_ready(not failing, failing[0] if failing else "ready")
