"""What a worker tells of the snapshots it runs: a log line per chunk (rows, share of the group's
token ranges done, rows/s, ETA) and the per-table gauges `cdc_bridge_snapshot_groups` and
`cdc_bridge_snapshot_progress`. The snapshot itself is the source's (`bridge/scylla/snapshot_scan.py`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from bridge.observability.metrics import Metrics
from bridge.scylla.events import SnapshotRead
from bridge.scylla.groups import GroupId

log = structlog.get_logger(__name__)


@dataclass
class _Running:
    started: float
    rows: int = 0
    fraction: float = 0.0


class SnapshotProgress:
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._running: dict[GroupId, _Running] = {}

    def chunk(self, event: SnapshotRead) -> None:
        group = event.group
        running = self._running.setdefault(group, _Running(time.monotonic()))
        running.rows += len(event.rows)
        running.fraction = event.fraction
        elapsed = max(time.monotonic() - running.started, 1e-3)
        eta = None if event.fraction <= 0 else round(elapsed * (1 - event.fraction) / event.fraction, 1)
        log.info("snapshot chunk", keyspace=group.keyspace, table=group.table, group=str(group),
                 rows=len(event.rows), group_rows=running.rows, done=round(event.fraction, 4),
                 rows_per_s=round(running.rows / elapsed), eta_s=eta)
        self._update(group.keyspace, group.table)

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
