"""Streams: which CDC stream a write goes to (cdc-log-format.md section 6). Pure code.

Vnode mode: a generation (global to the cluster) is a list of vnode ranges sorted by their end
token; range *i* covers `(end[i-1], end[i]]` and range 0 wraps around. Each range holds one stream
per shard of its owning node; stream *j* carries the first token of the range that shard *j* owns
(ScyllaDB's `find_first_token_for_shard`), the vnode index and random bits. A token's stream is
`streams[shard_of(token)]` of the first range whose end is >= the token.

Tablets mode: each table has its own stream set, one stream per tablet carrying the tablet's last
token and index 0; a token's stream is the first stream whose token is >= it.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.metadata import Murmur3Token

from bridge.scylla.schema import TableSchema
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim.values import routing_key

MIN_TOKEN = -(1 << 63)
MAX_TOKEN = (1 << 63) - 1
_U64 = (1 << 64) - 1


def token_of(table: TableSchema, key: Sequence[Any]) -> int:
    """Murmur3 token of a partition key, as Cassandra and ScyllaDB compute it."""
    types = [c.type for c in table.partition_key]
    return int(Murmur3Token.hash_fn(routing_key(key, types, table.keyspace)))


# ---------------------------------------------------------------- sharding


def shard_of(token: int, shards: int, ignore_msb: int) -> int:
    """ScyllaDB's `zero_based_shard_of`: the token as an unsigned fraction, top bits dropped."""
    unbiased = ((token + (1 << 63)) << ignore_msb) & _U64
    return (unbiased * shards) >> 64


def first_token_for_shard(start: int, end: int, shard: int, shards: int, ignore_msb: int) -> int:
    """The smallest token in the ring range `(start, end]` that `shard` owns; `end` if none."""
    span_bits = 64 - ignore_msb
    span = 1 << span_bits
    first = -(-shard * span // shards)  # ceil(shard * span / shards): the shard's first offset
    stop = -(-(shard + 1) * span // shards)
    candidate = (start + 1 + (1 << 63)) & _U64  # unbiased, wrapping past the maximum token
    offset = candidate & (span - 1)
    base = candidate - offset
    if offset < first:
        candidate = base + first
    elif offset >= stop:
        candidate = base + span + first
    candidate &= _U64
    token = candidate - (1 << 63)
    return token if _in_ring_range(token, start, end) else end


def _in_ring_range(token: int, start: int, end: int) -> bool:
    if start < end:
        return start < token <= end
    return token > start or token <= end


# ---------------------------------------------------------------- vnode generations


@dataclass(frozen=True, slots=True)
class VnodeRange:
    """One row of `cdc_streams_descriptions_v2`: the range ending at `end` and its streams in
    shard order."""

    end: int
    streams: tuple[StreamId, ...]


@dataclass(frozen=True, slots=True)
class Generation:
    """A vnode CDC generation; `timestamp_ms` is its start (a CQL `timestamp`)."""

    timestamp_ms: int
    ranges: tuple[VnodeRange, ...]
    ignore_msb: int = 12

    def stream_for(self, token: int) -> StreamId:
        ends = [r.end for r in self.ranges]
        index = bisect.bisect_left(ends, token)
        chosen = self.ranges[index if index < len(ends) else 0]
        return chosen.streams[shard_of(token, len(chosen.streams), self.ignore_msb)]

    def vnodes(self) -> list[tuple[int, int]]:
        """(token, shard count) of every vnode, enough to build the next generation."""
        return [(r.end, len(r.streams)) for r in self.ranges]


def random_tokens(count: int, rng: random.Random, taken: Iterable[int] = ()) -> list[int]:
    used = set(taken)
    tokens: list[int] = []
    while len(tokens) < count:
        token = rng.randint(MIN_TOKEN + 1, MAX_TOKEN)
        if token not in used:
            used.add(token)
            tokens.append(token)
    return tokens


def build_generation(
    timestamp_ms: int, vnodes: Iterable[tuple[int, int]], ignore_msb: int, rng: random.Random
) -> Generation:
    """A new generation for vnodes given as (token, shard count of the owning node)."""
    ordered = sorted(vnodes)
    ranges: list[VnodeRange] = []
    for index, (end, shards) in enumerate(ordered):
        start = ordered[index - 1][0]  # index 0 wraps around to the last token
        streams = tuple(
            StreamId.build(first_token_for_shard(start, end, shard, shards, ignore_msb), rng.getrandbits(38), index)
            for shard in range(shards)
        )
        ranges.append(VnodeRange(end, streams))
    return Generation(timestamp_ms, tuple(ranges), ignore_msb)


def shard_ordered(streams: Iterable[StreamId], ignore_msb: int) -> tuple[StreamId, ...]:
    """A range's streams read back from the metadata table (a set, so byte order) in shard order."""
    items = list(streams)
    return tuple(sorted(items, key=lambda s: (shard_of(s.token, len(items), ignore_msb), s.raw)))


# ---------------------------------------------------------------- tablet stream sets


@dataclass(frozen=True, slots=True)
class StreamSet:
    """The streams of one tablets table from `timestamp_ms` on, in token order."""

    timestamp_ms: int
    streams: tuple[StreamId, ...]

    def stream_for(self, token: int) -> StreamId:
        tokens = [s.token for s in self.streams]
        return self.streams[min(bisect.bisect_left(tokens, token), len(tokens) - 1)]


def tablet_stream(last_token: int, rng: random.Random) -> StreamId:
    return StreamId.build(last_token, rng.getrandbits(38), 0)


def uniform_last_tokens(count: int) -> list[int]:
    """Last tokens of `count` equal tablets (`count` a power of 2)."""
    return [MIN_TOKEN + (i + 1) * (1 << 64) // count - 1 for i in range(count)]


def _starts(streams: Sequence[StreamId]) -> list[int]:
    """First token of each tablet: right after the previous tablet's last token."""
    return [MIN_TOKEN] + [s.token + 1 for s in streams[:-1]]


def split_streams(streams: Sequence[StreamId], rng: random.Random, only: Iterable[int] | None = None) -> list[StreamId]:
    """Split every tablet (or the tablets at positions `only`) in two halves."""
    chosen = set(range(len(streams)) if only is None else only)
    result: list[StreamId] = []
    for position, (start, stream) in enumerate(zip(_starts(streams), streams, strict=True)):
        if position in chosen and stream.token > start:
            middle = start + (stream.token - start) // 2
            result += [tablet_stream(middle, rng), tablet_stream(stream.token, rng)]
        else:
            result.append(stream)
    return result


def merge_streams(streams: Sequence[StreamId], rng: random.Random) -> list[StreamId]:
    """Merge tablets pairwise (0+1, 2+3, ...): the merged tablet ends where the pair's second ends."""
    if len(streams) < 2 or len(streams) % 2:
        raise ValueError(f"cannot merge {len(streams)} tablets pairwise")
    return [tablet_stream(streams[i + 1].token, rng) for i in range(0, len(streams), 2)]


def replace_streams(streams: Sequence[StreamId], positions: Iterable[int], rng: random.Random) -> list[StreamId]:
    """Close the streams at `positions` and open a fresh stream for each same tablet."""
    chosen = set(positions)
    bad = [p for p in chosen if not 0 <= p < len(streams)]
    if bad:
        raise ValueError(f"no tablet at position {bad[0]} (the table has {len(streams)} tablets)")
    return [tablet_stream(s.token, rng) if i in chosen else s for i, s in enumerate(streams)]
