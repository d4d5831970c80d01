"""Which groups a worker starts: owned slot, not finished, predecessors finished."""

from __future__ import annotations

from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId, StreamGroup, TokenRange
from bridge.scylla.positions import Position
from bridge.scylla.stream_id import StreamId
from bridge.worker.ownership import GroupBook

STREAM = StreamId.from_hex("0x7fffd5c1a93c0000a1b2c3d4e5f60001")
RANGE = (TokenRange(0, 10),)


def group(generation: int, vnode: int, predecessors: frozenset[GroupId] = frozenset()) -> StreamGroup:
    return StreamGroup(GroupId.vnode("ks", "t", generation, vnode), (STREAM,), generation * 1000, RANGE, predecessors)


def book_with(*groups: StreamGroup) -> GroupBook:
    book = GroupBook("c", 4)
    for g in groups:
        book.discovered(g)
    book.owned = {book.slots[g.id] for g in groups}
    return book


def test_only_owned_groups_start() -> None:
    old = group(1, 0)
    book = book_with(old)
    book.owned = set()
    assert book.to_start({}) == []
    book.owned = {slot_of("c", old.id, 4)}
    assert book.to_start({}) == [old.id]
    book.active.add(old.id)
    assert book.to_start({}) == []


def test_successor_waits_for_predecessor_committed_at_its_end() -> None:
    old = group(1, 0)
    new = group(2, 0, frozenset({old.id}))
    book = book_with(old, new)
    assert book.to_start({}) == [old.id]
    book.end_known(old.id, 2_000_000)
    assert book.to_start({old.id: Position(1_000_000, 1_500_000)}) == [old.id]
    finished = {old.id: Position.at(2_000_000)}
    assert book.to_start(finished) == [new.id]


def test_undiscovered_predecessor_does_not_block() -> None:
    unknown = GroupId.vnode("ks", "t", 0, 9)
    new = group(2, 0, frozenset({unknown}))
    assert book_with(new).to_start({}) == [new.id]
