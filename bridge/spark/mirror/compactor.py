"""Compaction beside the streaming mirror's appends, off the path of fresh data.

A compaction takes seconds to minutes (it reads the stored rows the pending changes touch and
MERGEs them); run inline it held the next micro-batch's appends, and so the view's freshness, for
that long. A continuously running mirror starts it in a thread instead and goes on appending. It
is safe beside appends because a compaction folds one version of each changelog and then deletes
exactly the appends that version held (`mirror.changelog.ChangeLog.clear`); a blind append does
not conflict with that delete under Delta's default WriteSerializable isolation. One compaction
runs at a time; its failure fails the next micro-batch, so the query restarts as after any error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from bridge.spark.core.errors import SparkJobError

log = structlog.get_logger(__name__)


class BackgroundCompaction:
    def __init__(self, compact: Callable[[], int]) -> None:
        self._compact = compact
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._stopped = threading.Event()

    def tick(self, every_s: float, check: Callable[[], None]) -> None:
        """Call `check` every `every_s` seconds in a daemon thread until `stop`: Spark runs no
        micro-batch without new input, so a bound on how long changes stay pending needs a clock
        of its own."""
        def run() -> None:
            while not self._stopped.wait(every_s):
                check()

        threading.Thread(target=run, name="mirror-compaction-clock", daemon=True).start()

    def stop(self) -> None:
        """No compaction starts from now on, by the clock or by `start` (one running goes on to its end)."""
        self._stopped.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start a compaction unless one is running (or the clock was stopped); returns whether it
        started."""
        if self.running or self._stopped.is_set():
            return False
        # A plain thread, not pyspark's InheritableThread: the compaction's jobs must not join the
        # streaming query's job group (they would be counted as the micro-batch's, and cancelled
        # with it).
        self._thread = threading.Thread(target=self._run, name="mirror-compaction", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        started = time.monotonic()
        try:
            changed = self._compact()
        except BaseException as error:  # reported by the next micro-batch, in the query's thread
            self._failure = error
            log.error("background compaction failed", error=str(error))
            return
        log.info("background compaction done", rows_changed=changed, seconds=round(time.monotonic() - started, 2))

    def raise_failure(self) -> None:
        """Raise the last compaction's failure, once."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise SparkJobError(f"the mirror's background compaction failed: {failure}") from failure

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
        self.raise_failure()
