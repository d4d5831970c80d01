"""Groups from stream metadata: vnode generations and tablet stream sets. Pure code.

- A vnode generation (one `cdc_streams_descriptions_v2` partition) becomes one group per
  (table, vnode index), holding that vnode's streams; every group of the previous generation
  ends at the new generation's start.
- A tablet table keeps one group per live stream. At each new stream-set timestamp T only the
  delta applies: closed streams end exactly at T, opened streams start at T, unchanged streams
  keep their group (and their reader) untouched.
- A new group's predecessors are the ending groups whose token ranges overlap its own: they
  held its keys before the switch, so it is read only after they have finished.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bridge.scylla.groups import (
    GroupId,
    StreamGroup,
    TokenRange,
    ranges_overlap,
    ring_partition,
    sorted_streams,
)
from bridge.scylla.stream_id import StreamId

MS = 1000


@dataclass(frozen=True, slots=True)
class VnodeRange:
    """One row of `cdc_streams_descriptions_v2`: a token range end and its streams."""

    range_end: int
    streams: tuple[StreamId, ...]


@dataclass(frozen=True, slots=True)
class Generation:
    start_ms: int
    ranges: tuple[VnodeRange, ...]


def vnode_groups(
    keyspace: str, table: str, generation: Generation, previous: Sequence[StreamGroup] = ()
) -> list[StreamGroup]:
    """The groups of `table` in `generation`, with predecessors among `previous` (the groups of
    the generation before it)."""
    rows = sorted(generation.ranges, key=lambda r: r.range_end)
    ranges_of_row = ring_partition([r.range_end for r in rows])
    streams: dict[int, list[StreamId]] = defaultdict(list)
    token_ranges: dict[int, list[TokenRange]] = defaultdict(list)
    for row, row_ranges in zip(rows, ranges_of_row, strict=True):
        for stream in row.streams:
            streams[stream.index].append(stream)
            token_ranges[stream.index].extend(row_ranges)
    groups = []
    for index in sorted(streams):
        ranges = tuple(sorted(set(token_ranges[index])))
        groups.append(
            StreamGroup(
                id=GroupId.vnode(keyspace, table, generation.start_ms, index),
                streams=sorted_streams(streams[index]),
                start_us=generation.start_ms * MS,
                token_ranges=ranges,
                predecessors=frozenset(p.id for p in previous if ranges_overlap(p.token_ranges, ranges)),
            )
        )
    return groups


def tablet_ranges(current: Iterable[StreamId]) -> dict[StreamId, tuple[TokenRange, ...]]:
    """A tablet stream's token is its tablet's last token: the stream covers the tokens after
    the previous stream's token up to its own (the first one wraps)."""
    by_token = sorted(current, key=lambda s: s.token)
    ranges = ring_partition([s.token for s in by_token])
    return dict(zip(by_token, ranges, strict=True))


@dataclass(frozen=True, slots=True)
class StreamSetDelta:
    """What changed at one stream-set timestamp (states 1 and 2 of `cdc_streams`)."""

    timestamp_ms: int
    closed: frozenset[StreamId]
    opened: frozenset[StreamId]


@dataclass(frozen=True, slots=True)
class TabletChange:
    """Result of applying a stream set: groups to start, and groups that end (and when)."""

    started: tuple[StreamGroup, ...]
    ended: Mapping[GroupId, int]


class TabletTopology:
    """The live streams of one tablet table and their groups."""

    def __init__(self, keyspace: str, table: str) -> None:
        self.keyspace = keyspace
        self.table = table
        self.timestamp_ms: int | None = None
        self._groups: dict[StreamId, StreamGroup] = {}

    @property
    def groups(self) -> tuple[StreamGroup, ...]:
        return tuple(self._groups.values())

    def load(self, timestamp_ms: int, current: Iterable[StreamId], opened_ms: Mapping[StreamId, int]) -> TabletChange:
        """The first stream set read: every current stream gets a group starting where it
        opened (`opened_ms`, or this set's timestamp when its opening is no longer listed)."""
        streams = set(current)
        ranges = tablet_ranges(streams)
        for stream in streams:
            opened = opened_ms.get(stream, timestamp_ms)
            self._groups[stream] = self._group(stream, opened, ranges[stream], frozenset())
        self.timestamp_ms = timestamp_ms
        return TabletChange(self.groups, {})

    def apply(self, delta: StreamSetDelta) -> TabletChange:
        """Apply the next stream set's delta; unchanged streams keep their group."""
        if self.timestamp_ms is not None and delta.timestamp_ms <= self.timestamp_ms:
            return TabletChange((), {})
        before = tablet_ranges(self._groups)
        closing = [self._groups[s] for s in sorted(delta.closed) if s in self._groups]
        after_streams = (set(self._groups) - delta.closed) | delta.opened
        after = tablet_ranges(after_streams)
        started = []
        for stream in sorted(delta.opened - set(self._groups)):
            preds = frozenset(g.id for g in closing if ranges_overlap(before[g.streams[0]], after[stream]))
            group = self._group(stream, delta.timestamp_ms, after[stream], preds)
            started.append(group)
        ended = {g.id: delta.timestamp_ms * MS for g in closing}
        for group in closing:
            del self._groups[group.streams[0]]
        for group in started:
            self._groups[group.streams[0]] = group
        self.timestamp_ms = delta.timestamp_ms
        return TabletChange(tuple(started), ended)

    def _group(
        self, stream: StreamId, opened_ms: int, ranges: tuple[TokenRange, ...], preds: frozenset[GroupId]
    ) -> StreamGroup:
        return StreamGroup(
            id=GroupId.tablet(self.keyspace, self.table, opened_ms, stream),
            streams=(stream,),
            start_us=opened_ms * MS,
            token_ranges=ranges,
            predecessors=preds,
        )
