"""What a worker tells of the snapshots it runs: a log line per chunk (rows, share of the group's
token ranges done, rows/s, ETA), the per-table gauges `cdc_bridge_snapshot_groups` and
`cdc_bridge_snapshot_progress`, and with `notification.enabled.channels=kafka` Debezium's
notification records (`STARTED`, `IN_PROGRESS` per chunk, `COMPLETED` per group), produced in the
chunk's own transaction, so they are exactly as committed as its rows. The snapshot itself is the
source's (`bridge/scylla/snapshot_scan.py`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from bridge.observability.metrics import Metrics
from bridge.scylla.events import SnapshotRead
from bridge.scylla.groups import GroupId
from bridge.worker.encoding import SerializedRecord

log = structlog.get_logger(__name__)


@dataclass
class _Running:
    started: float
    rows: int = 0
    fraction: float = 0.0


class SnapshotReporter:
    def __init__(self, metrics: Metrics, connector: str, notifications_topic: str | None) -> None:
        self._metrics = metrics
        self._connector = connector
        self._topic = notifications_topic
        self._running: dict[GroupId, _Running] = {}

    def chunk(self, event: SnapshotRead) -> list[SerializedRecord]:
        """Tell of a chunk; returns the notification records to produce with it."""
        group = event.group
        notes = []
        if group not in self._running:
            notes.append(self._note(event, "STARTED", 0))
        running = self._running.setdefault(group, _Running(time.monotonic()))
        running.rows += len(event.rows)
        running.fraction = event.fraction
        elapsed = max(time.monotonic() - running.started, 1e-3)
        eta = None if event.fraction <= 0 else round(elapsed * (1 - event.fraction) / event.fraction, 1)
        if event.rows:
            log.info("snapshot chunk", keyspace=group.keyspace, table=group.table, group=str(group),
                     rows=len(event.rows), group_rows=running.rows, done=round(event.fraction, 4),
                     rows_per_s=round(running.rows / elapsed), eta_s=eta)
        notes.append(self._note(event, "IN_PROGRESS", running.rows))
        if event.fraction >= 1.0:
            notes.append(self._note(event, "COMPLETED", running.rows))
        self._update(group.keyspace, group.table)
        return [note for note in notes if note is not None]

    def _note(self, event: SnapshotRead, kind: str, rows: int) -> SerializedRecord | None:
        """A notification as Debezium's sink channel writes them."""
        if self._topic is None:
            return None
        group, progress = event.group, event.position.snapshot
        data = {"connector_name": self._connector, "data_collections": f"{group.keyspace}.{group.table}",
                "group": str(group), "total_rows_scanned": str(rows), "done": f"{event.fraction:.4f}",
                "last_processed_key": "" if progress is None or progress.after_token is None
                else str(progress.after_token)}
        value = {"id": str(uuid.uuid4()),
                 "aggregateType": "Incremental Snapshot" if event.kind == "incremental" else "Initial Snapshot",
                 "type": kind, "additionalData": data, "timestamp": str(int(time.time() * 1000))}
        return self._topic, str(group).encode(), json.dumps(value).encode()

    def ended(self, groups: Iterable[GroupId]) -> None:
        """These groups' snapshots are over, or no longer this worker's to run."""
        for group in groups:
            if self._running.pop(group, None) is not None:
                self._update(group.keyspace, group.table)

    def _update(self, keyspace: str, table: str) -> None:
        mine = [r for g, r in self._running.items() if (g.keyspace, g.table) == (keyspace, table)]
        self._metrics.snapshot_groups.labels(keyspace, table).set(len(mine))
        self._metrics.snapshot_progress.labels(keyspace, table).set(
            sum(r.fraction for r in mine) / len(mine) if mine else 0)
