"""The worker's side of the control plane: it follows the control topic (`bridge/control/`) and
applies the connector's target state and restart requests, through the loop's own operations.

- PAUSED: the loop stops its groups after committing what they read (no reads, no records),
  keeps its slots, and reports lag (of the groups it holds) and status as before.
- STOPPED: as PAUSED, and the worker leaves the slot group (its slots go, so the offsets may be
  edited: `cdc-bridge offsets reset`, REST `PATCH`/`DELETE`); the process keeps running.
- STARTED (resume): it joins the slot group again if it had left and starts the groups from their
  committed positions, exactly once as always.
- A restart request retries the failed groups of the slots it covers at once.

A worker reads the control topic to its end before it joins the slot group, so one started while
PAUSED or STOPPED never reads a record. Every change is logged with who asked for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from bridge.control.control_records import ControlRecordError, RestartRequest, TargetState, TargetStateRecord
from bridge.control.control_topic import ControlFollower
from bridge.kafka.status_topic import HEARTBEAT_S
from bridge.scylla.groups import GroupId

log = structlog.get_logger(__name__)
POLL_INTERVAL_S = 0.2  # a pause reaches every worker within a few turns; polling each turn costs CPU
CATCH_UP_TIMEOUT_S = 30.0
_APPLIED = {TargetState.STARTED: "RUNNING", TargetState.PAUSED: "PAUSED", TargetState.STOPPED: "STOPPED"}


class Steering:
    """`apply(state)` is the loop's way to a target state; `restart(request)` retries groups."""

    def __init__(self, follower: ControlFollower, *, apply: Callable[[TargetState], None],
                 restart: Callable[[RestartRequest], list[GroupId]]) -> None:
        self._follower = follower
        self._apply, self._restart = apply, restart
        self.target = TargetState.STARTED
        self._next_poll = 0.0
        self._next_heartbeat = 0.0

    @property
    def applied(self) -> str:
        """What this worker reports in the status topic: RUNNING, PAUSED or STOPPED."""
        return _APPLIED[self.target]

    @property
    def reading(self) -> bool:
        return self.target is TargetState.STARTED

    def catch_up(self) -> TargetState:
        """The target state written so far (before the worker joins the slot group)."""
        record = self._follower.catch_up(CATCH_UP_TIMEOUT_S)
        if record is not None:
            self.target = record.state
            if not self.reading:
                log.warning("worker starts without reading", state=str(record.state),
                            requested_by=record.requested_by, at_ms=record.at_ms,
                            resume_with="cdc-bridge resume (or PUT /connectors/<name>/resume)")
        return self.target

    def poll(self) -> None:
        """At most every POLL_INTERVAL_S, apply what arrived in the control topic."""
        now = time.monotonic()
        if now < self._next_poll:
            return
        self._next_poll = now + POLL_INTERVAL_S
        for record in self._follower.poll():
            if isinstance(record, ControlRecordError):
                log.warning("control record skipped", error=str(record))
            elif isinstance(record, TargetStateRecord):
                self._target(record)
            else:
                groups = self._restart(record)
                log.info("restart requested", task=record.task, include_tasks=record.include_tasks,
                         only_failed=record.only_failed, requested_by=record.requested_by,
                         groups=[str(g) for g in groups])

    def _target(self, record: TargetStateRecord) -> None:
        if record.state is self.target:
            return
        log.info("target state changed", state=str(record.state), was=str(self.target),
                 requested_by=record.requested_by, at_ms=record.at_ms)
        self.target = record.state
        self._apply(record.state)

    def heartbeat_due(self) -> bool:
        """Whether the status record should be offered again (the writer resends it every
        HEARTBEAT_S). Only while STOPPED: a worker in the slot group is known live by its
        membership, and a record every 10 s from every worker would grow the status topic that
        every status read goes through (compaction waits for the segment to roll)."""
        now = time.monotonic()
        if self.target is not TargetState.STOPPED or now < self._next_heartbeat:
            return False
        self._next_heartbeat = now + HEARTBEAT_S / 4
        return True

    def close(self) -> None:
        self._follower.close()

