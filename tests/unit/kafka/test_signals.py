"""Debezium signal records and which of them each group still has to act on."""

from __future__ import annotations

import json

import pytest

from bridge.kafka.signals import EXECUTE, STOP, Signal, SignalError, parse_signal, signal_value
from bridge.scylla.groups import GroupId, StreamGroup, TokenRange
from bridge.scylla.positions import Position, SnapshotProgress
from bridge.scylla.stream_id import StreamId
from bridge.worker.signal_book import SignalBook


def test_a_debezium_execute_snapshot_signal_is_read() -> None:
    value = b'{"id":"ad-hoc-1","type":"execute-snapshot","data":{"data-collections":["ks.t"],"type":"incremental"}}'
    assert parse_signal(7, value) == Signal(7, "ad-hoc-1", EXECUTE, (("ks", "t"),))
    assert parse_signal(8, signal_value(STOP, ["ks.t"], "s")) == Signal(8, "s", STOP, (("ks", "t"),))
    assert parse_signal(9, b'{"id":"x","type":"stop-snapshot","data":{}}').tables == ()


@pytest.mark.parametrize(("value", "problem"), [
    (b"{", "not JSON"),
    (b"[]", "not a JSON object"),
    (b'{"type":"log","data":{}}', "is not execute-snapshot or stop-snapshot"),
    (b'{"type":"execute-snapshot","data":{"data-collections":["ks.t"],"type":"blocking"}}', "only incremental"),
    (b'{"type":"execute-snapshot","data":{"data-collections":["ks.t"],"additional-conditions":[{"x":1}]}}',
     "additional-conditions are not supported"),
    (b'{"type":"execute-snapshot","data":{}}', "names no data-collections"),
    (b'{"type":"execute-snapshot","data":{"data-collections":["t"]}}', "is not keyspace.table"),
])
def test_a_bad_signal_says_what_is_wrong(value: bytes, problem: str) -> None:
    with pytest.raises(SignalError, match=problem):
        parse_signal(0, value)


def test_the_signal_value_written_by_the_cli_is_debeziums() -> None:
    value = json.loads(signal_value(EXECUTE, ["ks.t"], "id-1"))
    assert value == {"id": "id-1", "type": "execute-snapshot",
                     "data": {"data-collections": ["ks.t"], "type": "incremental"}}


def group(name: str, *predecessors: GroupId) -> StreamGroup:
    return StreamGroup(GroupId("ks", "t", 1, name), (StreamId.build(0, 0, 0),), 0, (TokenRange(0, 1),),
                       frozenset(predecessors))


def test_each_group_acts_once_on_the_newest_signal_beyond_its_mark() -> None:
    book, a = SignalBook(), group("1")
    book.starting(a, Position.at(5), True, {})  # saved before any signal
    assert book.take(a.id) is None
    book.seen(Signal(3, "s", EXECUTE, (("ks", "t"),)))
    taken = book.take(a.id)
    assert taken is not None and taken.offset == 3 and book.take(a.id) is None
    book.seen(Signal(4, "x", EXECUTE, (("ks", "other"),)))
    assert book.take(a.id) is None
    book.seen(Signal(5, "stop", STOP, ()))  # a stop without tables stops every table's
    taken = book.take(a.id)
    assert taken is not None and taken.type == STOP and book.stopped(("ks", "t"))


def test_start_marks_of_first_reads_saved_groups_and_successors() -> None:
    book = SignalBook()
    book.seen(Signal(9, "s", EXECUTE, (("ks", "t"),)))
    first = group("1")
    assert book.starting(first, None, True, {}) == 9  # a first read does not act on old signals
    saved = group("2")
    assert book.starting(saved, Position(5, 5, None, None, 4), True, {}) == 4
    assert book.take(saved.id) is not None  # committed before signal 9: acts on it
    old, older = GroupId("ks", "t", 0, "1"), GroupId("ks", "t", 0, "2")
    successor = group("3", old, older)
    done = {old: Position(9, 9, None, None, 9), older: Position(9, 9, None, None, 9)}
    assert book.starting(successor, Position.at(9), False, done) == 9
    unfinished = {**done, older: Position(9, 9, None, SnapshotProgress("incremental", 3), 9)}
    assert book.starting(successor, Position.at(9), False, unfinished) is None  # it redoes the snapshot
