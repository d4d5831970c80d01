"""The source scheduler's inbox: what other threads post to the one thread that owns the reading.

The worker's thread posts starts, stops and wake-ups (`None`), the driver's threads page answers
(`pages.PageAnswer`, `snapshot_pages.ScanAnswer`), and discovery's thread what it found, through
`InboxSink`. The scheduler
(`reader.py`) takes them in order and alone touches its state, so none of that state needs a lock.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from bridge.scylla.events import ReaderFailed
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.output import OutputBuffer
from bridge.scylla.pages import PageAnswer
from bridge.scylla.positions import Position
from bridge.scylla.snapshot_pages import ScanAnswer

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Start:
    group: GroupId
    position: Position | None
    stops_seen: int
    saved: bool = True  # a position from the offsets (False: where its predecessors ended)


@dataclass(frozen=True, slots=True)
class Stop:
    group: GroupId


@dataclass(frozen=True, slots=True)
class Found:
    groups: list[StreamGroup]
    ttl_s: int
    key_columns: list[str]


@dataclass(frozen=True, slots=True)
class Call:
    """Anything else discovery reports, applied on the scheduler thread."""

    apply: Callable[[], None]


Message = Start | Stop | PageAnswer | ScanAnswer | Found | Call | None


class InboxSink:
    """Discovery's reports, posted to the scheduler's inbox."""

    def __init__(
        self,
        inbox: queue.Queue[Message],
        output: OutputBuffer,
        on_ends: Callable[[dict[GroupId, int]], None],
        on_horizon: Callable[[tuple[str, str], int], None],
    ) -> None:
        self._inbox = inbox
        self._output = output
        self._on_ends = on_ends
        self._on_horizon = on_horizon

    def groups_found(self, groups: list[StreamGroup], ttl_s: int, key_columns: list[str]) -> None:
        self._inbox.put(Found(groups, ttl_s, key_columns))

    def ends_found(self, ends: dict[GroupId, int]) -> None:
        self._inbox.put(Call(lambda: self._on_ends(ends)))

    def horizon(self, keyspace: str, table: str, horizon_us: int) -> None:
        self._inbox.put(Call(lambda: self._on_horizon((keyspace, table), horizon_us)))

    def discovery_failed(self, keyspace: str, table: str, message: str) -> None:
        log.error("cdc discovery failed", keyspace=keyspace, table=table, error=message)
        self._output.put([ReaderFailed(None, f"{keyspace}.{table}", message)])
