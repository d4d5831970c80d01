"""Units of reading: one group per (table, generation, vnode index) for vnode tables, one group per
stream for tablet tables; their identity, token ranges and the offsets key of design.md 2.3.

Pure code. Token ranges let a new group know which old groups held the same keys before a
generation or stream-set switch (its predecessors), so per-key order survives the switch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from bridge.scylla.stream_id import StreamId

TOKEN_MIN = -(2**63)
TOKEN_MAX = 2**63 - 1


class GroupKind(Enum):
    VNODE = "vnode"
    TABLET = "tablet"


@dataclass(frozen=True, slots=True)
class GroupId:
    """Stable identity of a group; maps one to one onto the offsets key of design.md 2.3.

    - vnode group: `vnode_id` = the vnode index (decimal, as the Java connector writes it),
      `generation_start_ms` = the generation timestamp;
    - tablet group: `vnode_id` = the stream id as `0x` + 32 hex digits (unique: stream ids carry
      38 random bits), `generation_start_ms` = the stream-set timestamp at which the stream opened.
    """

    keyspace: str
    table: str
    generation_start_ms: int
    vnode_id: str

    @property
    def kind(self) -> GroupKind:
        return GroupKind.TABLET if self.vnode_id.startswith("0x") else GroupKind.VNODE

    @classmethod
    def vnode(cls, keyspace: str, table: str, generation_start_ms: int, index: int) -> GroupId:
        return cls(keyspace, table, generation_start_ms, str(index))

    @classmethod
    def tablet(cls, keyspace: str, table: str, opened_ms: int, stream: StreamId) -> GroupId:
        return cls(keyspace, table, opened_ms, str(stream))

    def offsets_key(self) -> dict[str, str]:
        """The Kafka Connect source partition, all values strings like the Java connector's."""
        return {
            "keyspace_name": self.keyspace,
            "table_name": self.table,
            "vnode_id": self.vnode_id,
            "generation_start": str(self.generation_start_ms),
        }

    @classmethod
    def from_offsets_key(cls, key: dict[str, object]) -> GroupId:
        try:
            return cls(
                str(key["keyspace_name"]),
                str(key["table_name"]),
                int(str(key["generation_start"])),
                str(key["vnode_id"]),
            )
        except (KeyError, ValueError) as error:
            raise ValueError(f"not a CDC offsets key: {key!r} ({error})") from error

    def __str__(self) -> str:
        return f"{self.keyspace}.{self.table}/{self.generation_start_ms}/{self.vnode_id}"


@dataclass(frozen=True, slots=True, order=True)
class TokenRange:
    """Tokens `(start, end]` with start < end; wrapping ranges are split in two."""

    start: int
    end: int

    def overlaps(self, other: TokenRange) -> bool:
        return max(self.start, other.start) < min(self.end, other.end)


def ring_ranges(range_end: int, previous_end: int | None) -> tuple[TokenRange, ...]:
    """The ranges covered by `(previous_end, range_end]`; the first entry of a ring
    (previous_end None = the largest end of the ring) wraps around the token space."""
    if previous_end is not None and previous_end < range_end:
        return (TokenRange(previous_end, range_end),)
    wrap_from = range_end if previous_end is None else previous_end
    parts = [TokenRange(TOKEN_MIN - 1, range_end)]
    if wrap_from < TOKEN_MAX:
        parts.append(TokenRange(wrap_from, TOKEN_MAX))
    return tuple(parts)


def ring_partition(ends: Sequence[int]) -> list[tuple[TokenRange, ...]]:
    """Ranges of each entry of a ring given its sorted, distinct range ends: entry i covers
    `(ends[i-1], ends[i]]` and entry 0 wraps from the last end."""
    if len(ends) == 1:
        return [ring_ranges(ends[0], None)]
    return [ring_ranges(end, ends[i - 1]) for i, end in enumerate(ends)]


def ranges_overlap(left: Iterable[TokenRange], right: Iterable[TokenRange]) -> bool:
    right_list = list(right)
    return any(a.overlaps(b) for a in left for b in right_list)


def read_order(stream: StreamId) -> bytes:
    """Streams of one group are read, and positions compared, in the Java library's order
    (`ByteBuffer.compareTo`: signed bytes), so a position it saved resumes here exactly."""
    return bytes(b ^ 0x80 for b in stream.raw)


@dataclass(frozen=True, slots=True)
class StreamGroup:
    """A group's streams (in read order), where it starts, which token ranges it covers, and
    the groups of the previous generation or stream set whose keys it takes over."""

    id: GroupId
    streams: tuple[StreamId, ...]
    start_us: int
    token_ranges: tuple[TokenRange, ...]
    predecessors: frozenset[GroupId] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not self.streams:
            raise ValueError(f"group {self.id} has no streams")
        if list(self.streams) != sorted(self.streams, key=read_order):
            raise ValueError(f"streams of group {self.id} are not in read order")

    @property
    def keyspace(self) -> str:
        return self.id.keyspace

    @property
    def table(self) -> str:
        return self.id.table


def sorted_streams(streams: Iterable[StreamId]) -> tuple[StreamId, ...]:
    return tuple(sorted(set(streams), key=read_order))
