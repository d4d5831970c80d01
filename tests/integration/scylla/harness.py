"""Drives a `SourceReader` in tests: starts every discovered group, collects what it hands on."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge.scylla.events import (
    GroupDiscovered,
    GroupEndKnown,
    GroupFinished,
    GroupProgress,
    ReaderFailed,
    RecordRead,
    SourceEvent,
)
from bridge.scylla.groups import GroupId
from bridge.scylla.reader import SourceReader
from bridge.scylla.settings import ReaderSettings


def settings_for(keyspace: str, **overrides: Any) -> ReaderSettings:
    """Test settings: metadata tables in `keyspace`, a 2 s confidence window, fast polls."""
    base: dict[str, Any] = {
        "confidence_window_size_ms": 2000,
        "vnodes_metadata_keyspace": keyspace,
        "tablets_metadata_keyspace": keyspace,
        "metadata_poll_interval_ms": 300,
        "poll_interval_ms": 200,
        "initial_lookback_ms": 120_000,
        "backoff_max_ms": 2000,
    }
    base.update(overrides)
    return ReaderSettings(**base)


@dataclass
class Collected:
    events: list[tuple[float, SourceEvent]] = field(default_factory=list)
    started: list[GroupId] = field(default_factory=list)

    def records(self) -> list[RecordRead]:
        return [e for _, e in self.events if isinstance(e, RecordRead)]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for _, e in self.events if isinstance(e, kind)]

    def failures(self) -> list[ReaderFailed]:
        return self.of(ReaderFailed)

    def progress_of(self, group: GroupId) -> int:
        marks = [e.position.window_start_us for _, e in self.events
                 if isinstance(e, GroupProgress | GroupFinished) and e.group == group]
        return max(marks, default=0)


def run_reader(
    reader: SourceReader,
    until: Callable[[Collected], bool],
    timeout_s: float = 60,
    start: Callable[[GroupDiscovered], bool] = lambda _: True,
    collected: Collected | None = None,
) -> Collected:
    """Poll until `until(collected)` holds; every discovered group `start` accepts is started."""
    collected = collected or Collected()
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for event in reader.poll(0.2):
            collected.events.append((time.time(), event))
            if isinstance(event, GroupDiscovered) and start(event):
                reader.start_group(event.group.id)
                collected.started.append(event.group.id)
        assert not collected.failures(), collected.failures()
        if until(collected):
            return collected
    raise AssertionError(f"reader did not get there in {timeout_s} s; last events: {collected.events[-5:]}")


def finished_groups(collected: Collected) -> set[GroupId]:
    return {e.group for e in collected.of(GroupFinished)}


def ends(collected: Collected) -> dict[GroupId, int]:
    return {e.group: e.end_us for e in collected.of(GroupEndKnown)}
