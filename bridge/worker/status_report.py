"""What this worker tells others about itself: its failed groups (the `/readyz` gate and the
status topic) and, in its status-topic record, the target state it has applied, its instance id,
its slots and each failed group's details (what `cdc-bridge status` and Connect's `/status` show).

A change marks the record due, from anywhere (a rebalance callback too); it is sent from the loop
only (`send_if_due`): librdkafka answers `memberid()` on its own thread, which waits for a
rebalance callback to end (a worker that lost its slots hung there when it was asked inside one).
"""

from __future__ import annotations

import time

from bridge.kafka.slots import SlotMembership
from bridge.kafka.status_topic import GroupFailure, StatusWriter
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.groups import GroupId
from bridge.worker.ownership import GroupBook
from bridge.worker.steering import Steering


class StatusReport:
    def __init__(self, writer: StatusWriter, telemetry: WorkerTelemetry, book: GroupBook, instance: str,
                 steering: Steering) -> None:
        self._writer, self._telemetry, self._book = writer, telemetry, book
        self._instance, self._steering = instance, steering
        self.due = False  # the record in the status topic is out of date

    def failures(self) -> dict[GroupId, str]:
        return {group: failed.reason for group, failed in self._book.failed.items()}

    def failures_changed(self) -> None:
        self._telemetry.failed_groups(self.failures())
        self.due = True

    def send_if_due(self, membership: SlotMembership | None) -> None:
        """Sent when due and, while STOPPED, as a heartbeat (the writer sends what changed, and
        the same record every HEARTBEAT_S)."""
        if not (self.due or self._steering.heartbeat_due()):
            return
        self.due = False
        member_id = membership.member_id() if membership is not None else ""
        if member_id is None:  # not joined yet ("": STOPPED, out of the slot group)
            return
        failed = self.failures()
        self._writer.publish(member_id, failed, state=self._steering.applied, instance=self._instance,
                             slots=self._book.owned, failures=group_failures(self._book, failed))

    def close(self) -> None:
        self._writer.close()


def group_failures(book: GroupBook, failed: dict[GroupId, str]) -> dict[GroupId, GroupFailure]:
    """The status topic's details of each failed group (next retry in epoch ms)."""
    now_mono, now_ms = time.monotonic(), time.time() * 1000
    details = {}
    for group in failed:
        entry = book.failed[group]
        retry_ms = None if entry.retry_at is None else int(now_ms + max(0.0, entry.retry_at - now_mono) * 1000)
        details[group] = GroupFailure(book.slots.get(group), entry.reason, entry.attempts, retry_ms)
    return details
