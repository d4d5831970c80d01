"""What the loop does with the reader's reports that carry no record: a possible gap (an expired
saved position), a group retrying a query, a group or table the reader cannot go on with."""

from __future__ import annotations

from collections.abc import Callable, Collection

import structlog

from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.events import GroupRetrying, PossibleGap, ReaderFailed
from bridge.scylla.groups import GroupId

log = structlog.get_logger(__name__)


def report(event: PossibleGap | GroupRetrying | ReaderFailed, telemetry: WorkerTelemetry, expired_mode: str,
           active: Collection[GroupId], fail_group: Callable[[GroupId, str], None]) -> str | None:
    """Log, count, fail the group where it must; returns the fatal error of a whole table's failure."""
    if isinstance(event, PossibleGap):
        telemetry.possible_gap(event.group.keyspace, event.group.table)
        log.error("possible gap: saved position older than the log TTL", keyspace=event.group.keyspace,
                  table=event.group.table, group=str(event.group), oldest_us=event.oldest_us,
                  mode=expired_mode)
        if expired_mode == "fail" and event.group in active:
            fail_group(event.group, "its saved position is older than the log's TTL: changes may have "
                       "expired unread (scylla.offsets.expired.mode=resume streams on from it; "
                       "cdc-bridge offsets reset starts it afresh)")
    elif isinstance(event, GroupRetrying):
        log.warning("group retrying", keyspace=event.group.keyspace, table=event.group.table,
                    group=str(event.group), error=event.error, delay_ms=round(event.delay_ms))
    elif event.group is not None:
        fail_group(event.group, event.message)
    else:
        return f"{event.table}: {event.message}"
    return None
