"""Stream choice for vnode generations and tablet stream sets, and ScyllaDB's timestamp rules."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import streams as st
from bridge_devstack.sim.errors import InvalidRequestError, ServerError
from bridge_devstack.sim.router import LEEWAY_US, check_vnode_timestamp

TOKENS = s.integers(min_value=st.MIN_TOKEN + 1, max_value=st.MAX_TOKEN)


def generation(nodes: int = 3, vnodes: int = 8, shards: int = 3, seed: int = 1) -> st.Generation:
    rng = random.Random(seed)
    tokens = st.random_tokens(nodes * vnodes, rng)
    return st.build_generation(1000, [(t, shards) for t in tokens], 12, rng)


def vnode_of(gen: st.Generation, token: int) -> int:
    """Index of the vnode range owning `token`: the first range end >= token, else range 0."""
    for index, rng in enumerate(gen.ranges):
        if token <= rng.end:
            return index
    return 0


def test_stream_id_layout_of_generated_streams() -> None:
    """Every stream is 16 bytes, version 1, indexed by its vnode in token order."""
    gen = generation()
    assert len(gen.ranges) == 24
    for index, rng in enumerate(gen.ranges):
        assert len(rng.streams) == 3
        for stream in rng.streams:
            assert len(stream.raw) == 16 and stream.version == 1 and stream.index == index
            assert StreamId.from_hex(stream.hex()) == stream


@given(token=TOKENS)
@settings(max_examples=300, deadline=None)
def test_vnode_stream_lies_in_the_keys_vnode_and_shard(token: int) -> None:
    """The chosen stream's token is in the same vnode range as the key's token, and on its shard."""
    gen = generation()
    stream = gen.stream_for(token)
    assert vnode_of(gen, stream.token) == vnode_of(gen, token) == stream.index
    shards = len(gen.ranges[stream.index].streams)
    assert st.shard_of(stream.token, shards, 12) == st.shard_of(token, shards, 12)
    assert gen.stream_for(token) == stream  # the same key at the same time: the same stream


@given(start=TOKENS, length=s.integers(min_value=1 << 53, max_value=1 << 62), shard=s.integers(0, 7))
def test_first_token_for_shard_is_the_first_one(start: int, length: int, shard: int) -> None:
    """In a range spanning a whole shard stripe (2^52 tokens) the token found belongs to the shard,
    lies in the range, and no earlier token of the range does."""
    end = start + length if start + length <= st.MAX_TOKEN else st.MIN_TOKEN + (start + length - st.MAX_TOKEN)
    token = st.first_token_for_shard(start, end, shard, 8, 12)
    assert st.shard_of(token, 8, 12) == shard
    before = token - 1 if token > st.MIN_TOKEN else st.MAX_TOKEN
    assert before == start or st.shard_of(before, 8, 12) != shard


def test_shard_of_matches_scylla_examples() -> None:
    """Token 0 is in the middle of a 2^52 stripe (shard n/2); the minimum token is shard 0."""
    assert st.shard_of(st.MIN_TOKEN, 4, 12) == 0
    assert st.shard_of(0, 4, 12) == 0  # unbiased 2^63: its low 52 bits are 0
    assert st.shard_of(-1, 4, 12) == 3


def test_shard_order_survives_the_metadata_set() -> None:
    """Streams read back as a byte-sorted set are put back in shard order."""
    gen = generation(shards=4)
    for rng in gen.ranges:
        assert st.shard_ordered(sorted(rng.streams), 12) == rng.streams


def test_tablet_layout_and_lookup() -> None:
    """Tablet streams end at the tablets' last tokens; a token goes to the first stream at or after it."""
    assert st.uniform_last_tokens(2) == [-1, st.MAX_TOKEN]
    assert st.uniform_last_tokens(4) == [-(1 << 62) - 1, -1, (1 << 62) - 1, st.MAX_TOKEN]
    rng = random.Random(3)
    streams = tuple(st.tablet_stream(t, rng) for t in st.uniform_last_tokens(4))
    assert all(s.index == 0 and s.version == 1 for s in streams)
    sset = st.StreamSet(0, streams)
    assert sset.stream_for(st.MIN_TOKEN + 1) == streams[0]
    assert sset.stream_for(-1) == streams[1]
    assert sset.stream_for(0) == streams[2]
    assert sset.stream_for(st.MAX_TOKEN) == streams[3]


@given(token=TOKENS)
def test_tablet_split_and_merge_keep_keys_in_their_tablet(token: int) -> None:
    """After a split or merge, the key's stream still ends at or after its token and the previous
    tablet ends before it."""
    rng = random.Random(5)
    four = [st.tablet_stream(t, rng) for t in st.uniform_last_tokens(4)]
    for layout in (four, st.split_streams(four, rng), st.merge_streams(four, rng), st.split_streams(four, rng, [1])):
        sset = st.StreamSet(0, tuple(layout))
        chosen = sset.stream_for(token)
        position = layout.index(chosen)
        assert chosen.token >= token
        assert position == 0 or layout[position - 1].token < token
    assert [s.token for s in st.split_streams(four, rng)] == st.uniform_last_tokens(8)
    assert [s.token for s in st.merge_streams(four, rng)] == st.uniform_last_tokens(2)


def test_partial_change_replaces_only_chosen_streams() -> None:
    """Replacing positions 1 and 2 keeps streams 0 and 3, and opens new ids on the same tablets."""
    rng = random.Random(7)
    four = [st.tablet_stream(t, rng) for t in st.uniform_last_tokens(4)]
    changed = st.replace_streams(four, [1, 2], rng)
    assert changed[0] == four[0] and changed[3] == four[3]
    assert changed[1] != four[1] and changed[1].token == four[1].token
    with pytest.raises(ValueError, match="no tablet at position 9"):
        st.replace_streams(four, [9], rng)
    with pytest.raises(ValueError, match="cannot merge 3 tablets"):
        st.merge_streams(four[:3], rng)


NOW = 1_800_000_000_000_000


def test_writes_from_the_future_are_refused() -> None:
    """A timestamp more than 5 s ahead of the server clock gets ScyllaDB's error."""
    check_vnode_timestamp(NOW + LEEWAY_US, NOW, [NOW - 60_000_000])
    with pytest.raises(InvalidRequestError, match='cdc: attempted to get a stream "from the future"'):
        check_vnode_timestamp(NOW + LEEWAY_US + 1, NOW, [NOW - 60_000_000])


def test_writes_from_the_past_are_refused_on_vnodes() -> None:
    """Before the generation operating at now-5s, or once a newer one has started: "from the past"."""
    starts = [NOW - 60_000_000]
    check_vnode_timestamp(NOW - 30_000_000, NOW, starts)  # old but in the current generation
    with pytest.raises(InvalidRequestError, match='"from the past"'):
        check_vnode_timestamp(123, NOW, starts)
    superseded = [NOW - 60_000_000, NOW - 2_000_000]  # a new generation started 2 s ago
    check_vnode_timestamp(NOW - 1_000_000, NOW, superseded)  # the near past is fine
    with pytest.raises(InvalidRequestError, match='"from the past"'):
        check_vnode_timestamp(NOW - 6_000_000, NOW, superseded)
    with pytest.raises(ServerError, match="could not find any CDC stream for timestamp"):
        check_vnode_timestamp(NOW - 1_000_000, NOW, [NOW])


@given(
    token=s.integers(st.MIN_TOKEN, st.MAX_TOKEN),
    random_bits=s.integers(0, (1 << 38) - 1),
    index=s.integers(0, (1 << 22) - 1),
)
def test_stream_id_round_trip(token: int, random_bits: int, index: int) -> None:
    """Encoding then decoding a stream id gives back token, random bits, index and version 1; the
    token is the first 8 bytes, big-endian signed."""
    stream = StreamId.build(token, random_bits, index)
    decoded = StreamId.from_hex(stream.hex())
    assert (decoded.token, decoded.random_bits, decoded.index, decoded.version) == (token, random_bits, index, 1)
    assert int.from_bytes(stream.raw[:8], "big", signed=True) == token
    assert stream.raw[15] & 0xF == 1
