"""Offset records byte-compatible with what Kafka Connect writes for the Java connector."""

from __future__ import annotations

import uuid

import pytest

from bridge.kafka.offsets import decode_key, decode_value, encode_key, encode_value
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.stream_id import StreamId

GROUP = GroupId("shop", "orders", 1_700_000_000_000, "12")
STREAM = StreamId.from_hex("0x7fffd5c1a93c0000a1b2c3d4e5f60001")


def test_key_is_the_java_connectors_bytes() -> None:
    """Connect serializes the connector's HashMap in bucket order, not insertion order."""
    assert encode_key("inventory", GROUP) == (
        b'["inventory",{"keyspace_name":"shop","vnode_id":"12","generation_start":"1700000000000",'
        b'"table_name":"orders"}]'
    )


def test_value_fields_in_hashmap_order_and_round_trip() -> None:
    position = Position(1_700_000_000_000_000, 1_700_000_030_000_000, ChangeId(STREAM, uuid.uuid1(), 3))
    encoded = encode_value(position)
    assert list(__import__("json").loads(encoded)) == [
        "batch_seq_no", "window_end", "change_id_time", "change_id_stream_id", "window_start"]
    assert b" " not in encoded
    assert decode_value(encoded) == position


def test_java_connector_value_resumes_after_the_whole_record() -> None:
    time = uuid.UUID("ca105ea8-e70c-11f1-8080-808080808080")
    value = (b'{"window_end":"d02e5c03-e70c-11f1-7f7f-7f7f7f7f7f7f","change_id_time":"' + str(time).encode()
             + b'","change_id_stream_id":"' + str(STREAM).encode()
             + b'","window_start":"ca105ea8-e70c-11f1-8080-808080808080"}')
    position = decode_value(value)
    assert position.last == ChangeId(STREAM, time, None)
    assert encode_value(position) == value


def test_keys_of_other_connectors_and_garbage_are_not_ours() -> None:
    assert decode_key(encode_key("inventory", GROUP)) == ("inventory", GROUP)
    assert decode_key(b'["mysql",{"server":"db1"}]') is None
    assert decode_key(b"not json") is None
    with pytest.raises(ValueError, match="not a CDC offsets value"):
        decode_value(b'{"scn":"1"}')
