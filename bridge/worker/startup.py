"""Start-up waits out a slow or briefly unavailable Kafka or Cassandra instead of exiting.

On a busy node (several workers starting at once, a broker restarting, a 2-core machine at load
5) a dependency that does not answer within one attempt's own timeouts usually answers a little
later; exiting at once turned that into a crash loop under Kubernetes and a failed first run on a
laptop (issue 42). So each start-up step that failed because a dependency did not answer is tried
again after a back-off (1 s, doubling up to 30 s), with one log line per attempt, until
`startup.timeout.ms` has passed since the process began to start; then the last reason ends
start-up as before. Meanwhile `/healthz` answers 200 (a heartbeat thread: the process is doing
what it should) and `/readyz` 503 with `starting: waiting for <dependency> (...)`.

Only "did not answer" is waited for: a refusal (credentials, certificates), a missing table or a
topic with the wrong settings raises its own error type, which passes through at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import structlog

log = structlog.get_logger(__name__)
T = TypeVar("T")
FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 30.0
_BEAT_EVERY_S = 1.0


class StartupWait:
    """Retries start-up steps within one bound shared by every step of one start."""

    def __init__(self, bound_s: float, *, beat: Callable[[], object] = lambda: None,
                 waiting: Callable[[str], object] = lambda _reason: None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> None:
        """`beat`: liveness, called every second until `done`; `waiting`: the readiness reason
        while a dependency is waited for."""
        self.bound_s = bound_s
        self._clock, self._sleep = clock, sleep
        self._started = clock()
        self._waiting = waiting
        self._done = threading.Event()
        self._beat = beat
        self.attempts = 0

    def start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._done.wait(_BEAT_EVERY_S):
                self._beat()

        threading.Thread(target=beat, name="startup-heartbeat", daemon=True).start()

    def done(self) -> None:
        """Start-up is over (the worker's loop beats from here on)."""
        self._done.set()

    def step(self, dependency: str, action: Callable[[], T], transient: Callable[[Exception], bool],
             cleanup: Callable[[], object] = lambda: None) -> T:
        """`action()`, tried again while what it raises is `transient` (a dependency that did not
        answer, never a refusal) and the bound is not reached; `cleanup` runs after each failed
        try (the clients of a half-made worker)."""
        pause = FIRST_PAUSE_S
        while True:
            try:
                return action()
            except Exception as error:
                if not transient(error):
                    raise
                cleanup()
                waited = self._clock() - self._started
                if waited + pause > self.bound_s:
                    log.error("start-up gave up waiting", dependency=dependency, attempt=self.attempts + 1,
                              waited_s=round(waited, 1), bound_s=self.bound_s, reason=str(error))
                    raise
                self.attempts += 1
                log.warning("start-up waiting for a dependency", dependency=dependency, attempt=self.attempts,
                            reason=str(error), retry_in_s=pause, waited_s=round(waited, 1), bound_s=self.bound_s)
                self._waiting(f"starting: waiting for {dependency} (attempt {self.attempts}: {error})")
                self._sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE_S)
