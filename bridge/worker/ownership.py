"""Which groups this worker reads: the pure bookkeeping behind the worker loop.

Every worker discovers every group; it reads a group when the group's slot is one of its own,
the group is not finished, and every predecessor the worker has discovered is finished. A
group is finished when its end is known and its committed position has reached it. Committed
positions come from the offsets topic, so a predecessor read by another worker counts as soon
as that worker's commit is visible, and per-key order holds across generation and tablet
stream-set switches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.positions import Position

FIRST_RETRY_S = 1.0  # then doubling, up to `errors.retry.delay.max.ms`


@dataclass
class FailedGroup:
    """A group stopped by a failure; `retry_at` (monotonic seconds) is when it starts again from
    its last commit, None once `errors.retry.timeout` has run out (it then stays failed)."""

    reason: str
    since: float  # the first failure of this streak
    attempts: int
    retry_at: float | None


@dataclass(frozen=True)
class RetryPolicy:
    """Kafka Connect's `errors.retry.timeout` (-1: for ever, 0: never) and
    `errors.retry.delay.max.ms`, in seconds."""

    timeout_s: float
    delay_max_s: float

    def next_retry(self, since: float, attempts: int, now: float) -> float | None:
        if self.timeout_s >= 0 and now - since >= self.timeout_s:
            return None
        return now + min(self.delay_max_s, FIRST_RETRY_S * 2.0 ** min(attempts - 1, 30))


@dataclass
class GroupBook:
    name: str
    slot_count: int
    groups: dict[GroupId, StreamGroup] = field(default_factory=dict)
    ends: dict[GroupId, int] = field(default_factory=dict)
    slots: dict[GroupId, int] = field(default_factory=dict)
    owned: set[int] = field(default_factory=set)
    active: set[GroupId] = field(default_factory=set)
    failed: dict[GroupId, FailedGroup] = field(default_factory=dict)
    # Groups restarted after a failure, until they commit progress: a new failure continues the
    # streak (longer waits) instead of starting a new one.
    retrying: dict[GroupId, FailedGroup] = field(default_factory=dict)

    def discovered(self, group: StreamGroup) -> None:
        self.groups[group.id] = group
        self.slots[group.id] = slot_of(self.name, group.id, self.slot_count)

    def end_known(self, group: GroupId, end_us: int) -> None:
        self.ends[group] = end_us

    def finished(self, group: GroupId, committed: Mapping[GroupId, Position]) -> bool:
        """Its end is known and reached, or (`snapshot.mode=initial_only`) its snapshot is over."""
        end = self.ends.get(group)
        position = committed.get(group)
        if position is not None and position.snapshot is not None and position.snapshot.completed:
            return True
        return end is not None and position is not None and position.window_start_us >= end

    def fail(self, group: GroupId, reason: str, now: float, policy: RetryPolicy) -> FailedGroup:
        """Stop `group` after a failure and schedule its retry."""
        self.active.discard(group)
        streak = self.retrying.pop(group, None)
        since, attempts = (streak.since, streak.attempts + 1) if streak is not None else (now, 1)
        failed = self.failed[group] = FailedGroup(reason, since, attempts, policy.next_retry(since, attempts, now))
        return failed

    def progressed(self, groups: Iterable[GroupId]) -> None:
        """These groups committed progress: a restarted group's failure streak is over."""
        for group in groups:
            self.retrying.pop(group, None)

    def forget_failures(self, slots: Iterable[int]) -> None:
        """Slots that left this worker: their failed groups are the new owner's to try."""
        gone = set(slots)
        for book in (self.failed, self.retrying):
            for group in [g for g in book if self.slots.get(g) in gone]:
                del book[group]

    def to_start(self, committed: Mapping[GroupId, Position], now: float = 0.0) -> list[GroupId]:
        """Owned groups that are not running, not finished, whose predecessors are, and which are
        not failed (or whose retry is due: they leave `failed` for `retrying`)."""
        ready = []
        for group_id, group in self.groups.items():
            if self.slots[group_id] not in self.owned or group_id in self.active:
                continue
            failed = self.failed.get(group_id)
            if failed is not None and (failed.retry_at is None or failed.retry_at > now):
                continue
            if self.finished(group_id, committed):
                continue
            if all(p not in self.groups or self.finished(p, committed) for p in group.predecessors):
                ready.append(group_id)
                if failed is not None:
                    self.retrying[group_id] = self.failed.pop(group_id)
        return ready

    def retry_now(self, covers: Callable[[int], bool], now: float) -> list[GroupId]:
        """An operator's restart (Connect's): the failed groups of the covered slots start at the
        next turn, with a fresh streak (attempts and `errors.retry.timeout` counted from now)."""
        groups = sorted((g for g in self.failed if covers(self.slots.get(g, -1))), key=str)
        for group in groups:
            self.failed[group] = FailedGroup(self.failed[group].reason, now, 0, now)
        return groups

    def next_retry(self) -> float | None:
        """The earliest scheduled retry of a failed group."""
        return min((f.retry_at for f in self.failed.values() if f.retry_at is not None), default=None)

    def active_in(self, slots: Iterable[int]) -> list[GroupId]:
        wanted = set(slots)
        return sorted((g for g in self.active if self.slots[g] in wanted), key=str)
