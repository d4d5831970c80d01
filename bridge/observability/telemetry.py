"""What a worker tells operators, in one place: the worker loop reports facts (a record read, a
translation, a commit, who owns what, where each group is) and this turns them into Prometheus
metrics, readiness, lag and the catch-up progress line. The worker holds no metric logic and
this module reads nothing by itself.

Readiness is four gates, in this order: the transactional producer is initialised, the worker
has joined the slot group and serves its assignment, Kafka is reachable (told by librdkafka's
statistics of the producer and the slot consumer, `kafka_health`), and no owned group is failed
(the reason lists the failed groups and why).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bridge.envelope import Translation
from bridge.observability.health import Health, ReadinessGates
from bridge.observability.http import ProbeServer, serve_http
from bridge.observability.kafka_health import KafkaConnectivity
from bridge.observability.metrics import Metrics
from bridge.observability.progress import CatchUp, ProgressLine
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

GATES = ("producer", "group", "kafka", "groups")
_LISTED_FAILURES = 5  # in the readiness reason; the log has every one
_TICK_S = 1.0  # lags, gauges and the progress line: once a second is plenty and costs nothing


class WorkerTelemetry:
    def __init__(self, tables: Iterable[tuple[str, str]], confidence_window_ms: int, metrics_port: int,
                 progress: ProgressLine | None = None, clock: Callable[[], float] = time.time,
                 metrics_host: str = "0.0.0.0",  # noqa: S104 (probes come from outside the container)
                 any_free_port: bool = False) -> None:
        """`metrics_port` 0: no server, unless `any_free_port` (a supervised worker process, whose
        supervisor asks `metrics_port` which one was bound)."""
        self.metrics = Metrics()
        self.metrics.declare_tables(tables)
        self.health = Health(on_ready=lambda ready: self.metrics.ready.set(1 if ready else 0))
        self._gates = ReadinessGates(self.health, GATES, initially_ok=["kafka", "groups"])
        self.kafka = KafkaConnectivity(on_change=lambda ok, reason: self._gates.set("kafka", ok, reason))
        self._confidence_s = confidence_window_ms / 1000
        self._clock = clock
        self._catch_up = CatchUp()
        self._progress = progress or ProgressLine()
        self._records = 0
        # Per-record facts are summed here and handed to prometheus-client once a tick: its
        # counters take a lock per increment, which showed in the catch-up profile.
        self._rows: dict[tuple[str, str], int] = {}
        self._produced: dict[tuple[str, str, str], int] = {}
        self._next_tick = 0.0
        self._server: ProbeServer | None = (serve_http(metrics_port, self.metrics, self.health, metrics_host)
                                              if metrics_port or any_free_port else None)

    @property
    def metrics_port(self) -> int | None:
        """The port /metrics is served on (the one bound when `metrics.port` is 0), None when off."""
        return self._server.port if self._server is not None else None

    def kafka_client_settings(self) -> dict[str, Any]:
        """Merged into the clients polled all the time (producer, slot consumer)."""
        return self.kafka.client_settings()

    # ------------------------------------------------------------------ readiness

    def producer_ready(self, ok: bool, reason: str = "") -> None:
        self._gates.set("producer", ok, reason or ("kafka producer initialised" if ok else "kafka producer: starting"))

    def group_joined(self, ok: bool, reason: str = "") -> None:
        self._gates.set("group", ok, reason or ("serving the assignment" if ok else "group: not joined"))

    # ------------------------------------------------------------------ facts

    def rows_read(self, keyspace: str, table: str, rows: int) -> None:
        key = (keyspace, table)
        self._rows[key] = self._rows.get(key, 0) + rows

    def translated(self, keyspace: str, table: str, translation: Translation) -> None:
        produced = self._produced
        for record in translation.records:
            key = (keyspace, table, "tombstone" if record.value is None else str(record.value.get("op", "other")))
            produced[key] = produced.get(key, 0) + 1
        self._records += len(translation.records)
        for reason, count in translation.dropped.items():
            self.metrics.dropped(keyspace, table, reason.value, count)

    def _hand_over_counts(self) -> None:
        for (keyspace, table), rows in self._rows.items():
            self.metrics.rows_read(keyspace, table, rows)
        for (keyspace, table, op), count in self._produced.items():
            self.metrics.produced(keyspace, table, op, count)
        self._rows.clear()
        self._produced.clear()

    def committed(self, seconds: float) -> None:
        self.metrics.committed(seconds)

    def aborted(self, fenced: bool) -> None:
        self.metrics.aborted("fenced" if fenced else "aborted")

    def possible_gap(self, keyspace: str, table: str) -> None:
        self.metrics.possible_gap(keyspace, table)

    def query_answered(self, keyspace: str, table: str, seconds: float, error: BaseException | None) -> None:
        """The reader's query observer (runs on the reader's thread)."""
        if error is None:
            self.metrics.query_done(keyspace, table, seconds)
        else:
            self.metrics.query_failed(keyspace, table, "transient")

    def group_failed(self, keyspace: str, table: str) -> None:
        self.metrics.query_failed(keyspace, table, "fatal")

    def offsets_record_corrupt(self, kind: str) -> None:
        self.metrics.offsets_record_corrupt(kind)

    def change_failed(self, keyspace: str, table: str, action: str) -> None:
        """A change that could not be carried: `failed` (its group stops) or `passed` (warn/skip)."""
        self.metrics.change_failed(keyspace, table, action)

    def failed_groups(self, failures: Mapping[GroupId, str]) -> None:
        """The owned groups that are failed now, with their reasons (empty: none)."""
        if not failures:
            self._gates.set("groups", True, "no failed group")
            return
        listed = sorted(failures.items(), key=lambda item: str(item[0]))[:_LISTED_FAILURES]
        more = len(failures) - len(listed)
        text = "; ".join(f"{g.keyspace}.{g.table} group {g}: {reason}" for g, reason in listed)
        self._gates.set("groups", False, f"{len(failures)} failed group(s): {text}"
                        + (f"; and {more} more" if more > 0 else ""))

    # ------------------------------------------------------------------ each loop turn

    def turn(self, positions: Callable[[], Mapping[GroupId, Position]], owned_slots: int,
             queue_depth: Callable[[], int]) -> None:
        """Called every turn of the main loop; `positions` (of the groups being read) and
        `queue_depth` are only asked for once a second."""
        self.health.beat()
        now = self._clock()
        if now < self._next_tick:
            return
        self._next_tick = now + _TICK_S
        self._hand_over_counts()
        horizon = now - self._confidence_s
        current = positions()
        lags = {(g.keyspace, g.table, str(g)): max(0.0, horizon - p.window_start_us / 1e6) for g, p in current.items()}
        self.metrics.set_lags(lags)
        self.metrics.set_owned(owned_slots, len(current))
        self.metrics.set_queue_depth(queue_depth())
        self._catch_up.add(now, max(lags.values(), default=0.0), self._records)
        self._progress.update(self._catch_up, len(current))

    def close(self) -> None:
        self._hand_over_counts()
        self._progress.clear()
        if self._server is not None:
            self._server.close()
