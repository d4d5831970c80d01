"""Which groups this worker reads: the pure bookkeeping behind the worker loop.

Every worker discovers every group; it reads a group when the group's slot is one of its own,
the group is not finished, and every predecessor the worker has discovered is finished. A
group is finished when its end is known and its committed position has reached it. Committed
positions come from the offsets topic, so a predecessor read by another worker counts as soon
as that worker's commit is visible, and per-key order holds across generation and tablet
stream-set switches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.positions import Position


@dataclass
class GroupBook:
    name: str
    slot_count: int
    groups: dict[GroupId, StreamGroup] = field(default_factory=dict)
    ends: dict[GroupId, int] = field(default_factory=dict)
    slots: dict[GroupId, int] = field(default_factory=dict)
    owned: set[int] = field(default_factory=set)
    active: set[GroupId] = field(default_factory=set)
    failed: set[GroupId] = field(default_factory=set)

    def discovered(self, group: StreamGroup) -> None:
        self.groups[group.id] = group
        self.slots[group.id] = slot_of(self.name, group.id, self.slot_count)

    def end_known(self, group: GroupId, end_us: int) -> None:
        self.ends[group] = end_us

    def finished(self, group: GroupId, committed: Mapping[GroupId, Position]) -> bool:
        end = self.ends.get(group)
        position = committed.get(group)
        return end is not None and position is not None and position.window_start_us >= end

    def to_start(self, committed: Mapping[GroupId, Position]) -> list[GroupId]:
        """Owned groups that are not running, not finished, and whose predecessors are."""
        ready = []
        for group_id, group in self.groups.items():
            if self.slots[group_id] not in self.owned or group_id in self.active or group_id in self.failed:
                continue
            if self.finished(group_id, committed):
                continue
            if all(p not in self.groups or self.finished(p, committed) for p in group.predecessors):
                ready.append(group_id)
        return ready

    def active_in(self, slots: Iterable[int]) -> list[GroupId]:
        wanted = set(slots)
        return sorted((g for g in self.active if self.slots[g] in wanted), key=str)
