"""Is Kafka reachable? Told by librdkafka itself: its statistics (every broker connection's
state, once per `statistics.interval.ms`) and its "all brokers down" error.

A client is connected while at least one of its broker connections is UP; Kafka counts as
reachable while no client reports otherwise. The callbacks run inside the clients' poll calls
on the worker's main thread: in its loop, inside a producer flush, and while a transactional
call blocks on another thread (`TransactionalProducer._bounded`), so a commit blocked on a dead
broker still reports. Give these settings only to clients that are polled all the time: an unpolled
client would queue a statistics event every interval forever.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaError

log = structlog.get_logger(__name__)
STATS_INTERVAL_MS = 1000
_STALE_INTERVALS = 5
# Errors that only say a connection is down; the connectivity state reports those once.
_CONNECTION_ERRORS = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})


def brokers_up(stats: Mapping[str, Any]) -> bool:
    """Whether a client's statistics show at least one broker connection UP."""
    brokers = stats.get("brokers") or {}
    return any(isinstance(b, Mapping) and b.get("state") == "UP" for b in brokers.values())


class KafkaConnectivity:
    def __init__(self, on_change: Callable[[bool, str], object], interval_ms: int = STATS_INTERVAL_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._on_change = on_change
        self._interval_ms = interval_ms
        self._clock = clock
        self._clients: dict[str, tuple[bool, float]] = {}  # name -> (a broker connection up, reported at)
        self.reachable = True
        # Callbacks also run on the thread of a blocked transactional call (its own flush).
        self._lock = threading.Lock()

    def client_settings(self) -> dict[str, Any]:
        """librdkafka settings to merge into a client's configuration."""
        return {"error_cb": self.on_error, "stats_cb": self.on_stats, "statistics.interval.ms": self._interval_ms}

    def on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            with self._lock:
                now = self._clock()
                for name in self._clients:
                    self._clients[name] = (False, now)
                self._update(False, f"kafka unreachable: {error.str()}")
        elif error.code() not in _CONNECTION_ERRORS:
            log.warning("kafka client error", error=error.str(), fatal=error.fatal())

    def on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        name = str(stats.get("name", "?"))
        with self._lock:
            now = self._clock()
            self._clients[name] = (brokers_up(stats), now)
            # A client that stopped reporting was closed (a replaced producer): it no longer counts.
            stale = now - _STALE_INTERVALS * self._interval_ms / 1000
            self._clients = {n: state for n, state in self._clients.items() if state[1] >= stale}
            down = sorted(n for n, (up, _) in self._clients.items() if not up)
            if down:
                self._update(False, f"kafka unreachable: no broker connection up ({', '.join(down)})")
            else:
                self._update(True, "kafka reachable")

    def _update(self, reachable: bool, reason: str) -> None:
        if reachable != self.reachable:
            self.reachable = reachable
            self._on_change(reachable, reason)
