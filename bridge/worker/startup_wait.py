"""Start-up waits out a Kafka or Cassandra that is slow or briefly away (issue 42: on a loaded
machine a worker exited 60 s into start-up on 'Kafka did not answer' and started fine minutes
later; under Kubernetes that is a crash loop). Each attempt that finds a dependency unavailable
is logged as one line and retried with back-off, up to `startup.timeout.ms`; meanwhile /readyz
says what is awaited and /healthz stays true (the process is alive, waiting on purpose).
Configuration errors (refused credentials, a missing table, a topic with wrong settings) are
other exception types: they pass through at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import structlog

from bridge.observability.health import Health

log = structlog.get_logger(__name__)
T = TypeVar("T")
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
BEAT_EVERY_S = 5.0


def wait_out(dependency: str, attempt: Callable[[float], T], bound_s: float, *,
             unavailable: Callable[[BaseException], bool], health: Health | None = None,
             sleep: Callable[[float], object] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """`attempt(remaining_s)` until it returns; an exception for which `unavailable` holds is
    retried after 1, 2, 4 ... 30 s while `bound_s` allows another try, else re-raised (the last
    one, so its one-line reason is what the worker exits with)."""
    started = clock()
    pause = BACKOFF_FIRST_S
    tries = 0
    with _alive(health):
        while True:
            tries += 1
            try:
                return attempt(max(1.0, bound_s - (clock() - started)))
            except Exception as error:
                waited = clock() - started
                if not unavailable(error) or waited + pause >= bound_s:
                    if unavailable(error):
                        log.error("start-up gave up waiting", dependency=dependency, attempts=tries,
                                  waited_s=round(waited, 1), bound_s=bound_s, setting="startup.timeout.ms",
                                  error=str(error))
                    raise
                log.warning("start-up waiting", dependency=dependency, attempt=tries, waited_s=round(waited, 1),
                            retry_in_s=pause, bound_s=bound_s, setting="startup.timeout.ms", error=str(error))
                if health is not None:
                    health.set_ready(False, f"waiting for {dependency}: {error}")
                sleep(pause)
                pause = min(pause * 2, BACKOFF_MAX_S)


@contextmanager
def _alive(health: Health | None) -> Iterator[None]:
    """Liveness beats while start-up waits: the main loop has not begun, and a probe that failed
    after its 90 s bound would restart a pod that is waiting on purpose (the wait is bounded by
    startup.timeout.ms instead)."""
    if health is None:
        yield
        return
    done = threading.Event()

    def beat() -> None:
        while not done.wait(BEAT_EVERY_S):
            health.beat()

    thread = threading.Thread(target=beat, name="startup-alive", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        health.beat()
