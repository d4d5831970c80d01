"""The produce-and-commit cycle: records of every owned group go into one open Kafka
transaction, and each commit carries, in the same transaction, the offsets record of every group
it advanced (the Connect format of `bridge.kafka.offsets`) and the slot consumer's position
(KIP-447 fencing through the slot group's generation).

A transaction is committed when it holds `commit.max.records` records, has been open
`commit.interval.ms`, or the caught-up source has nothing more to hand on (`idle`: waiting out
the interval would only add latency); positions of groups that only advanced are committed
every `heartbeat.interval.ms`, or after `commit.interval.ms` when a successor waits for them
(`urgent`). `committed` holds what this worker committed itself: authoritative over the offsets
topic's view until the slot leaves the worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bridge.kafka.errors import ProducerFencedError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.transactions import TransactionalProducer
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.settings import BridgeConfig
from bridge.worker.encoding import SerializedRecord
from bridge.worker.recovery import ProducerKeeper


@dataclass
class Stats:
    records_produced: int = 0
    transactions: int = 0
    aborts: int = 0


class TransactionCycle:
    def __init__(self, config: BridgeConfig, keeper: ProducerKeeper, telemetry: WorkerTelemetry) -> None:
        self._config = config
        self._keeper = keeper
        self._telemetry = telemetry
        self._producer: TransactionalProducer | None = None
        self.stats = Stats()
        self.pending: dict[GroupId, Position] = {}
        self.committed: dict[GroupId, Position] = {}
        # The signals each group has taken in (`signal_book.py`), added to its committed position.
        self.signal_marks: dict[GroupId, int] = {}
        self.urgent = False
        self._txn_started = 0.0
        self._last_commit = time.monotonic()

    def start(self) -> None:
        self._producer = self._keeper.new()

    @property
    def started(self) -> bool:
        return self._producer is not None

    def queue_length(self) -> int:
        return 0 if self._producer is None else self._producer.queue_length()

    def stage(self, records: Sequence[SerializedRecord], group: GroupId, position: Position) -> None:
        """Produce one change's records into the open transaction; `position` (just after the
        change) is committed with them. Raises `TransactionAbortedError`."""
        producer = self._producer
        assert producer is not None
        if not producer.is_open:
            self._txn_started = time.monotonic()
        for record in records:
            producer.produce(*record)  # topic, key, value[, headers]
        self.stats.records_produced += len(records)
        self.pending[group] = position

    def advance(self, group: GroupId, position: Position, urgent: bool = False) -> None:
        """The group read up to `position` without records to produce (a window ended, or it finished)."""
        self.pending[group] = position
        self.urgent = self.urgent or urgent

    def due(self, idle: bool = False) -> bool:
        """Whether to commit now; `idle`: the source had nothing to hand on."""
        assert self._producer is not None
        self._producer.serve()
        now = time.monotonic()
        records = self._producer.records_in_transaction
        interval_s = self._config.commit_interval_ms / 1000
        if records > 0 and (idle or records >= self._config.commit_max_records
                            or now - self._txn_started >= interval_s):
            return True
        if not self.pending:
            return False
        since = now - self._last_commit
        return since >= self._config.heartbeat_interval_ms / 1000 or (self.urgent and since >= interval_s)

    def open(self) -> bool:
        """Something to commit: positions waiting or records in an open transaction."""
        return bool(self.pending) or (self._producer is not None and self._producer.is_open)

    def commit(self, fencing: Any, group_metadata: Any) -> dict[GroupId, Position]:
        """Commit the open transaction with the offsets of every advanced group; returns them.
        Raises `TransactionAbortedError` (nothing of it is committed)."""
        assert self._producer is not None
        started = time.monotonic()
        for group, position in self.pending.items():
            mark = self.signal_marks.get(group)
            if mark is not None and position.signal_offset != mark:
                position = self.pending[group] = replace(position, signal_offset=mark)
            self._producer.produce(self._config.offsets_topic, encode_key(self._config.name, group),
                                   encode_value(position))
        self._producer.commit(fencing, group_metadata)
        self._telemetry.committed(time.monotonic() - started)
        done, self.pending = self.pending, {}
        self.committed.update(done)
        self.urgent = False
        self._last_commit = time.monotonic()
        self.stats.transactions += 1
        return done

    def abort(self) -> bool:
        """Abort what is open and forget the uncommitted positions; True when the producer was
        fenced meanwhile and replaced (the last commit's outcome must then be read back)."""
        assert self._producer is not None
        self.stats.aborts += 1
        replaced = False
        try:
            self._producer.abort()
        except ProducerFencedError as error:
            self.replace_producer(str(error))
            replaced = True
        self.pending.clear()
        return replaced

    def replace_producer(self, reason: str) -> None:
        replacement = self._keeper.replace(self._producer, reason)
        if replacement is not None:
            self._producer = replacement

    def forget(self, groups: Iterable[GroupId]) -> None:
        for group in groups:
            self.committed.pop(group, None)
            self.pending.pop(group, None)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
