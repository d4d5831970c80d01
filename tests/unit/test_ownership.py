"""Which groups a worker starts: owned slot, not finished, predecessors finished."""

from __future__ import annotations

from bridge.kafka.slots import slot_of
from bridge.scylla.groups import GroupId, StreamGroup, TokenRange
from bridge.scylla.positions import Position
from bridge.scylla.stream_id import StreamId
from bridge.worker.ownership import GroupBook, RetryPolicy

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


def test_a_failed_group_waits_for_its_retry_then_starts_again_with_a_growing_wait() -> None:
    """A failed group is not started until its retry is due; failing again before it committed
    progress doubles the wait (up to the cap); progress ends the streak."""
    g = group(1, 0)
    book = book_with(g)
    policy = RetryPolicy(timeout_s=-1, delay_max_s=3.0)
    book.active.add(g.id)
    first = book.fail(g.id, "registry unreachable", now=100.0, policy=policy)
    assert (first.attempts, first.retry_at) == (1, 101.0) and g.id not in book.active
    assert book.to_start({}, now=100.5) == [] and book.next_retry() == 101.0
    assert book.to_start({}, now=101.0) == [g.id] and g.id not in book.failed and g.id in book.retrying
    waits = []
    for now in (200.0, 300.0, 400.0):  # each time restarted, then failing before any progress
        waits.append(book.fail(g.id, "again", now=now, policy=policy).retry_at)
        assert book.to_start({}, now=now + 10) == [g.id]
    assert waits == [202.0, 303.0, 403.0]  # 2 s, 4 s capped at 3 s
    book.progressed([g.id])
    assert book.fail(g.id, "new trouble", now=500.0, policy=policy).retry_at == 501.0


def test_a_group_failed_past_the_retry_timeout_stays_failed_and_a_revoked_slot_forgets_it() -> None:
    g = group(1, 0)
    book = book_with(g)
    never = RetryPolicy(timeout_s=0, delay_max_s=60.0)
    assert book.fail(g.id, "bad record", now=10.0, policy=never).retry_at is None
    assert book.to_start({}, now=1e9) == [] and book.next_retry() is None
    book.forget_failures(book.owned)
    assert book.failed == {} and book.to_start({}, now=11.0) == [g.id]
    bounded = RetryPolicy(timeout_s=5.0, delay_max_s=60.0)
    book.fail(g.id, "x", now=20.0, policy=bounded)
    book.to_start({}, now=21.0)
    assert book.fail(g.id, "x", now=26.0, policy=bounded).retry_at is None  # 6 s since the streak began


def test_a_restart_retries_the_covered_failed_groups_now_with_a_fresh_streak() -> None:
    """An operator's restart (Connect's task restart): the group of the covered slot starts at
    once, even with its retries exhausted, and its next failure counts from 1 again."""
    first, second = group(1, 0), group(1, 1)
    book = book_with(first, second)
    never = RetryPolicy(timeout_s=0, delay_max_s=60)
    for g in (first, second):
        book.fail(g.id, "boom", now=5.0, policy=never)
    assert book.failed[first.id].retry_at is None and book.to_start({}, now=100.0) == []
    slot = book.slots[first.id]
    covered = sorted((g.id for g in (first, second) if book.slots[g.id] == slot), key=str)
    assert book.retry_now(lambda s: s == slot, now=100.0) == covered
    assert sorted(book.to_start({}, now=100.0), key=str) == covered
    assert book.fail(first.id, "boom again", now=101.0, policy=RetryPolicy(-1, 60)).attempts == 1
