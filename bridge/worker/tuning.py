"""The worker's interpreter settings, applied once start-up is done: the garbage collector and
the threads' time slices.

CPython's cyclic collector runs after every 700 new container objects and, every tenth and
hundredth run, walks older generations, finally the whole heap. A catch-up allocates a dozen
containers per change (rows, records, envelopes, all freed by reference counting: they form no
cycles) and holds tens of thousands in the reader's buffer, so the collector ran ~1,600 times per
100k changes, and its 13 full collections walked the CQL driver's schema metadata of every
keyspace in the cluster each time: 3.8 s of GC in a 5.5 s catch-up (worker_bench, gc.callbacks).

So: `gc.freeze()` moves everything alive after start-up (modules, driver metadata, plans) out of
the collector's sight, and the thresholds make collections rare. Cycles still get collected (a
young collection per 100k allocations, a full one per 10M), so memory stays bounded.
The driver makes reference cycles per query (its ResponseFuture, our callbacks, the request's
timer) that held each page's rows until a collection; the reader breaks them once it has the
answer (`pages.release_future`), so pages are freed by reference counting and RSS stays flat.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable

# One young collection per 100k container allocations (~8k changes), an older one every 10 of
# those, a full one every 10 older ones (~800k changes): with the start-up heap frozen, a full
# collection walks only the live working set, and garbage cycles that outlived two younger
# collections (a page buffered across them) cannot pile up for long.
THRESHOLDS = (100_000, 10, 10)

# 200 ms instead of 5 while catching up: one worker catching up the 200k realistic backlog
# (bench/worker_bench.py, two runs each, same machine and hour) gave 27.2-28.4k envelopes per
# CPU-second instead of 25.0-25.7k (steady 31.8-33.3k instead of 29.0-29.8k), and 1 ms gave 22.7k.
# Once caught up, a long slice is latency: the reader's scheduler thread can wait up to a slice
# for the GIL before it sends the next query or hands on an answer.
SWITCH_INTERVAL_S = 0.2
CAUGHT_UP_SWITCH_INTERVAL_S = 0.005
# A catch-up hands on thousands of events per poll of the source (its buffer stays full); a
# caught-up worker tens to hundreds (2,000 writes/s: up to ~500 in one window's burst).
CATCHING_UP_EVENTS = 1_000
CAUGHT_UP_AFTER_S = 1.0


def tune_for_streaming() -> None:
    """Call once, after start-up: freezes what is alive now, sets `THRESHOLDS` and
    `SWITCH_INTERVAL_S`."""
    gc.collect()  # start-up's garbage is not frozen with the rest
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


class Pace:
    """Whether the worker is catching up (a poll of the source gave `CATCHING_UP_EVENTS` or more
    in the last `CAUGHT_UP_AFTER_S`) or caught up, and the GIL's time slice to match: long while
    catching up (throughput), short once caught up (latency). The loop commits as soon as the
    source is idle only when caught up: during a catch-up a pause of the source is no reason for
    an extra transaction."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last_big_poll = clock()
        self.catching_up = True  # as `tune_for_streaming` leaves the slice

    def follow(self, events: int) -> None:
        """Call after each poll of the source with the number of events it returned."""
        now = self._clock()
        if events >= CATCHING_UP_EVENTS:
            self._last_big_poll = now
            if not self.catching_up:
                self.catching_up = True
                sys.setswitchinterval(SWITCH_INTERVAL_S)
        elif self.catching_up and now - self._last_big_poll >= CAUGHT_UP_AFTER_S:
            self.catching_up = False
            sys.setswitchinterval(CAUGHT_UP_SWITCH_INTERVAL_S)
