"""The buffer between the reading thread and `SourceReader.poll`: a stopped group's events are
dropped until the start that follows the stop is taken by the scheduler, never earlier."""

from __future__ import annotations

from bridge.scylla.events import GroupDiscovered, GroupEndKnown, GroupProgress
from bridge.scylla.groups import GroupId, StreamGroup, TokenRange
from bridge.scylla.output import OutputBuffer
from bridge.scylla.positions import Position
from bridge.scylla.stream_id import StreamId

GROUP = GroupId("ks", "t", 1, "0")
OLD, NEW = GroupProgress(GROUP, Position.at(10)), GroupProgress(GROUP, Position.at(20))


def test_events_of_the_stopped_reading_are_dropped_until_the_restart_is_taken() -> None:
    buffer = OutputBuffer()
    buffer.put([OLD])
    buffer.stop_group(GROUP)  # drops what is buffered ...
    seen = buffer.stops(GROUP)  # (what start_group records)
    buffer.put([OLD])  # ... and what the old reading still emits before the scheduler takes the start
    buffer.resume_group(GROUP, seen)  # the scheduler took the start: the new reading's events pass
    buffer.put([NEW])
    assert buffer.take(0, 10) == [NEW]


def test_a_stop_after_the_start_wins_over_that_start() -> None:
    buffer = OutputBuffer()
    buffer.stop_group(GROUP)
    seen = buffer.stops(GROUP)
    buffer.stop_group(GROUP)  # stopped again before the scheduler took the start
    buffer.resume_group(GROUP, seen)
    buffer.put([NEW])
    assert buffer.take(0, 10) == []
    buffer.resume_group(GROUP, buffer.stops(GROUP))
    buffer.put([NEW])
    assert buffer.take(0, 10) == [NEW]


def test_discoveries_and_ends_pass_even_for_a_stopped_group() -> None:
    """A worker that stopped a group (its slot moved) still needs to know when the group ends:
    its successors may be this worker's."""
    group = StreamGroup(GROUP, (StreamId.build(0, 0, 0),), 0, (TokenRange(0, 1),))
    buffer = OutputBuffer()
    buffer.put([GroupEndKnown(GROUP, 5), OLD])
    buffer.stop_group(GROUP)
    buffer.put([GroupDiscovered(group), GroupEndKnown(GROUP, 7), OLD])
    assert buffer.take(0, 10) == [GroupEndKnown(GROUP, 5), GroupDiscovered(group), GroupEndKnown(GROUP, 7)]
