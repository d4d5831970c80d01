"""Positions and their offsets form, group ids and offsets keys, token ranges, the window planner."""

from __future__ import annotations

import uuid

import pytest

from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.groups import TOKEN_MAX, TOKEN_MIN, GroupId, TokenRange, read_order, ring_partition
from bridge.scylla.positions import ChangeId, Position, default_start_us, discovery_start_us, possible_gap_us
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from bridge.scylla.windows import GroupEnded, WaitUntil, Window, WindowPlanner

S = 1_000_000
STREAM = StreamId.build(-5, 9, 3)


def test_offsets_value_round_trips_with_batch_sequence() -> None:
    change = ChangeId(STREAM, timeuuid_for(1_700_000_001_000_007), 4)
    position = Position(1_700_000_000_123_456, 1_700_000_030_000_001, change)
    value = position.to_offsets_value()
    assert value["change_id_stream_id"] == "0x" + STREAM.hex()
    assert value["batch_seq_no"] == "4"
    assert all(isinstance(v, str) for v in value.values())
    assert Position.from_offsets_value(value) == position


def test_reads_java_connector_offsets_at_millisecond_bounds() -> None:
    # TimeUUID.startOf(1700000000000) and endOf(1700000030000 - 1) as the Java connector writes them
    start = uuid.UUID("6a1d5800-7e1d-11ee-8080-808080808080")
    end_ms = 1_700_000_030_000
    end = uuid.UUID(int=_java_end_of(end_ms - 1))
    value = {"window_start": str(start), "window_end": str(end),
             "change_id_stream_id": "0x" + STREAM.hex(), "change_id_time": str(timeuuid_for(1_700_000_001_000_000))}
    position = Position.from_offsets_value(value)
    assert position.window_start_us == (start.time - 0x01B21DD213814000) // 10
    assert position.window_end_us == end_ms * 1000
    assert position.last is not None and position.last.batch_seq_no is None


def _java_end_of(ms: int) -> int:
    ts60 = ms * 10_000 + 9_999 + 0x01B21DD213814000
    high = ((ts60 & 0xFFFFFFFF) << 32) | (((ts60 >> 32) & 0xFFFF) << 16) | (((ts60 >> 48) & 0x0FFF) | 0x1000)
    return (high << 64) | 0x7F7F7F7F7F7F7F7F


def test_bad_offsets_value_names_the_problem() -> None:
    with pytest.raises(ValueError, match="not a CDC offsets value"):
        Position.from_offsets_value({"window_start": "nonsense"})


def test_consumed_follows_read_order() -> None:
    t = timeuuid_for(10 * S)
    other = StreamId(bytes([0x80]) + STREAM.raw[1:])  # sorts before everything in Java's signed order
    position = Position(5 * S, 20 * S, ChangeId(STREAM, t, 1))
    assert position.consumed(other, timeuuid_for(19 * S), 0)
    assert position.consumed(STREAM, t, 1) and not position.consumed(STREAM, t, 2)
    assert not position.consumed(STREAM, timeuuid_for(11 * S), 0)
    assert position.consumed(STREAM, timeuuid_for(4 * S), 0)  # before the window
    assert read_order(other) < read_order(STREAM)


def test_group_id_maps_onto_the_offsets_key() -> None:
    vnode = GroupId.vnode("ks", "t", 1_700_000_000_000, 42)
    assert vnode.offsets_key() == {"keyspace_name": "ks", "table_name": "t", "vnode_id": "42",
                                   "generation_start": "1700000000000"}
    tablet = GroupId.tablet("ks", "t", 1_700_000_000_000, STREAM)
    assert tablet.offsets_key()["vnode_id"] == "0x" + STREAM.hex()
    assert GroupId.from_offsets_key(tablet.offsets_key()) == tablet
    assert tablet.kind.value == "tablet" and vnode.kind.value == "vnode"


def test_ring_partition_wraps_the_first_range() -> None:
    parts = ring_partition([-10, 0, 10])
    assert parts[1] == (TokenRange(-10, 0),)
    assert parts[2] == (TokenRange(0, 10),)
    assert set(parts[0]) == {TokenRange(TOKEN_MIN - 1, -10), TokenRange(10, TOKEN_MAX)}
    assert ring_partition([5]) == [(TokenRange(TOKEN_MIN - 1, 5), TokenRange(5, TOKEN_MAX))]


def test_default_start_and_gap() -> None:
    now = 1_000_000 * S
    assert default_start_us(now, 86_400, 0) == now - 86_400 * S
    assert default_start_us(now, 86_400, 60_000) == now - 60 * S
    assert default_start_us(now, 0, 0) == 0
    assert possible_gap_us(Position.at(now - 90_000 * S), now, 86_400) == now - 86_400 * S
    assert possible_gap_us(Position.at(now - 100 * S), now, 86_400) is None


PLANNER_SETTINGS = ReaderSettings(confidence_window_size_ms=2000, query_time_window_size_ms=10_000,
                                  poll_interval_ms=250, minimal_wait_for_window_time_ms=500)


def test_planner_reads_large_windows_when_behind_and_small_ones_when_caught_up() -> None:
    planner = WindowPlanner(PLANNER_SETTINGS)
    assert planner.plan(0, None, 100 * S) == Window(0, 10 * S)
    assert planner.plan(97 * S, None, 100 * S) == Window(97 * S, 98 * S)
    assert planner.plan(int(97.9 * S), None, 100 * S) == WaitUntil(int(98.15 * S) + 2 * S)


def test_planner_polls_a_busy_group_sooner_and_backs_off_while_windows_are_empty() -> None:
    planner = WindowPlanner(PLANNER_SETTINGS)  # poll 250 ms, busy poll 50 ms
    start = int(97.97 * S)  # 30 ms before the confidence line (98 s at 100 s)
    assert planner.plan(start, None, 100 * S) == WaitUntil(start + int(0.25 * S) + 2 * S)
    planner.record_result(Window(97 * S, start), rows=3)
    assert planner.plan(start, None, 100 * S) == WaitUntil(start + int(0.05 * S) + 2 * S)
    waits = []
    for _ in range(4):  # empty windows: 100, 200, then the idle interval again
        planner.record_result(Window(97 * S, start), rows=0)
        plan = planner.plan(start, None, 100 * S)
        assert isinstance(plan, WaitUntil)
        waits.append(plan.micros - start - 2 * S)
    assert waits == [int(0.1 * S), int(0.2 * S), int(0.25 * S), int(0.25 * S)]


def test_planner_clamps_to_the_group_end_and_ends() -> None:
    planner = WindowPlanner(PLANNER_SETTINGS)
    assert planner.plan(0, 3 * S, 100 * S) == Window(0, 3 * S)
    assert planner.plan(3 * S, 3 * S, 100 * S) == GroupEnded()
    # an end in the future is waited for, never read ahead of the confidence window
    assert planner.plan(99 * S, 150 * S, 100 * S) == WaitUntil(int(99.25 * S) + 2 * S)


def test_planner_respects_minimal_wait_and_metadata_horizon() -> None:
    planner = WindowPlanner(PLANNER_SETTINGS)
    assert planner.plan(0, None, 100 * S, last_read_us=int(99.8 * S)) == WaitUntil(int(100.3 * S))
    assert planner.plan(90 * S, None, 100 * S, horizon_us=95 * S) == Window(90 * S, 95 * S)
    assert planner.plan(95 * S, None, 100 * S, horizon_us=95 * S) == WaitUntil(int(100.25 * S))


def test_settings_reject_bad_values_by_name() -> None:
    """Errors name the property a field mirrors (the bridge's own knobs go by field name)."""
    with pytest.raises(ValueError, match=r"^scylla\.consistency\.level: 'MOST' is not one of ALL, EACH_QUORUM"):
        ReaderSettings(consistency_level="MOST")
    with pytest.raises(ValueError, match=r"^scylla\.confidence\.window\.size: must be >= 0, got -1$"):
        ReaderSettings(confidence_window_size_ms=-1)
    with pytest.raises(ValueError, match=r"^page_size: must be > 0, got 0$"):
        ReaderSettings(page_size=0)


def test_discovery_restarts_at_the_generation_of_the_oldest_saved_vnode_group() -> None:
    old, new = 1_700_000_000_000, 1_700_000_600_000
    finished = Position.at(new * 1000)  # a finished group's end: the next generation's start
    saved = [(GroupId.vnode("ks", "t", old, 1), finished),
             (GroupId.vnode("ks", "t", new, 5), Position.at(new * 1000 + 7))]
    # Group 0 of `old` never committed: discovery must start in `old` to find it again.
    assert discovery_start_us(saved) == old * 1000
    assert discovery_start_us([]) is None


def test_discovery_restarts_just_before_the_oldest_saved_position_of_a_tablet_stream() -> None:
    opened_long_ago = GroupId.tablet("ks", "t", 1_600_000_000_000, STREAM)
    finished_at_a_split = Position.at(1_700_000_000_000_000)
    # The stream set in effect before the split, where its unsaved siblings are found.
    assert discovery_start_us([(opened_long_ago, finished_at_a_split)]) == 1_699_999_999_999_999
