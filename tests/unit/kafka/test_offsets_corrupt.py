"""Unreadable records of the offsets topic: each is reported (log + on_corrupt), another connector's
key is ignored, and a record of ours leaves the group's position unknown instead of forgotten."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import CorruptOffsetsError, CorruptRecord, OffsetsTopic
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

GROUP = GroupId("ks", "t", 1_700_000_000_000, "3")
OTHER = GroupId("ks", "t", 1_700_000_000_000, "4")
FIRST, SECOND = Position.at(1_700_000_010_000_000), Position.at(1_700_000_020_000_000)


@pytest.fixture
def follower() -> Iterator[tuple[OffsetsTopic, list[CorruptRecord]]]:
    # Clients are built but never used: `apply` is the pure part (no broker is asked).
    seen: list[CorruptRecord] = []
    topic = OffsetsTopic({"bootstrap.servers": "127.0.0.1:1"}, "conn-offsets", "conn", on_corrupt=seen.append)
    yield topic, seen
    topic.close()


def test_another_connectors_keys_are_ignored_without_a_report(follower: tuple[OffsetsTopic, list[CorruptRecord]]
                                                               ) -> None:
    topic, seen = follower
    topic.apply(0, 1, b'["jdbc-source",{"table":"orders"}]', b'{"offset":42}')
    topic.apply(0, 2, b'["other",{"keyspace_name":"ks"}]', b"not json")
    assert topic.positions == {} and seen == [] and topic.corrupt_records() == []
    topic.refuse_corrupt()


def test_a_key_of_no_connector_is_reported_and_ignored(follower: tuple[OffsetsTopic, list[CorruptRecord]]) -> None:
    topic, seen = follower
    with structlog.testing.capture_logs() as logs:
        topic.apply(2, 7, b"\x00garbage", b"{}")
    assert [(r.kind, r.partition, r.offset) for r in seen] == [("key", 2, 7)]
    assert "not JSON" in seen[0].reason
    assert [(e["event"], e["partition"], e["offset"]) for e in logs] == [
        ("unreadable offsets record ignored: its key names no connector", 2, 7)]
    topic.refuse_corrupt()  # not ours: start-up goes on


def test_an_unreadable_value_of_our_group_keeps_it_unknown_until_replaced(
    follower: tuple[OffsetsTopic, list[CorruptRecord]],
) -> None:
    topic, seen = follower
    key = encode_key("conn", GROUP)
    topic.apply(0, 10, key, encode_value(FIRST))
    topic.apply(0, 11, encode_key("conn", OTHER), encode_value(FIRST))
    with structlog.testing.capture_logs() as logs:
        topic.apply(0, 12, key, b'{"window_start":"nope"}')
    assert [(r.kind, r.group, r.offset) for r in seen] == [("value", GROUP, 12)]
    assert logs[0]["log_level"] == "error" and logs[0]["group"] == str(GROUP) and logs[0]["offset"] == 12
    assert set(topic.corrupt) == {GROUP}
    with pytest.raises(CorruptOffsetsError) as refused:
        topic.refuse_corrupt()
    assert refused.value.key == "offset.storage.topic"
    assert f"of group {GROUP} at conn-offsets/0@12" in refused.value.reason
    assert "offsets reset --corrupt" in refused.value.reason
    topic.apply(0, 13, key, encode_value(SECOND))  # the owner's next commit replaces it
    assert topic.corrupt == {} and topic.positions[GROUP] == SECOND
    topic.refuse_corrupt()


def test_a_key_naming_us_but_no_group_refuses_start_until_tombstoned(
    follower: tuple[OffsetsTopic, list[CorruptRecord]],
) -> None:
    topic, seen = follower
    bad = b'["conn",{"keyspace_name":"ks","table_name":"t"}]'
    topic.apply(1, 5, bad, encode_value(FIRST))
    assert [(r.kind, r.key) for r in seen] == [("group_key", bad)]
    with pytest.raises(CorruptOffsetsError):
        topic.refuse_corrupt()
    topic.apply(1, 6, bad, None)
    topic.refuse_corrupt()
    assert len(seen) == 1  # the tombstone is no news


def test_a_tombstone_clears_an_unreadable_value(follower: tuple[OffsetsTopic, list[CorruptRecord]]) -> None:
    topic, _ = follower
    key = encode_key("conn", GROUP)
    topic.apply(0, 1, key, b"[]")
    topic.apply(0, 2, key, None)
    assert topic.corrupt == {} and topic.positions == {}
    topic.refuse_corrupt()
