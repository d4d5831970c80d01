"""The shared CDC model: stream ids, cdc$time, CQL types and log-table columns."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.scylla.cdc_time import max_timeuuid, micros_of, min_timeuuid, timeuuid_for, timeuuid_sort_key
from bridge.scylla.log_schema import log_columns
from bridge.scylla.schema import Column, ColumnKind, CqlTypeError, TableSchema, parse_cql_type, udt
from bridge.scylla.stream_id import StreamId


def test_stream_id_decodes_the_reference_examples() -> None:
    vnode = StreamId.from_hex("0x80838c6b76e19a1bc3581db310000011")
    assert (vnode.token, vnode.index, vnode.version) == (-9186344421721794021, 1, 1)
    tablet = StreamId.from_hex("ffffffffffffffff50e84c99d4000001")
    assert (tablet.token, tablet.index, tablet.version) == (-1, 0, 1)


@given(
    token=st.integers(-(2**63), 2**63 - 1),
    random_bits=st.integers(0, 2**38 - 1),
    index=st.integers(0, 2**22 - 1),
)
def test_stream_id_round_trips(token: int, random_bits: int, index: int) -> None:
    stream = StreamId.build(token, random_bits, index)
    assert (stream.token, stream.random_bits, stream.index, stream.version) == (token, random_bits, index, 1)
    assert StreamId.from_hex(stream.hex()) == stream


def test_stream_id_must_be_16_bytes() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        StreamId(b"\x00" * 15)


def test_cdc_time_decodes_the_reference_example() -> None:
    assert micros_of(uuid.UUID("b223c55e-6d07-11ea-7654-24e4fb3f20b9")) == 1584969040910883


@given(micros=st.integers(1_500_000_000_000_000, 2_500_000_000_000_000))
def test_cdc_time_layout_and_bounds(micros: int) -> None:
    value = timeuuid_for(micros)
    assert value.version == 1 and micros_of(value) == micros
    assert value.bytes[8] >> 6 == 0b10  # IETF variant forced, as ScyllaDB 2026.1 does
    assert timeuuid_sort_key(min_timeuuid(micros)) <= timeuuid_sort_key(value)
    assert timeuuid_sort_key(value) <= timeuuid_sort_key(max_timeuuid(micros))
    assert timeuuid_sort_key(max_timeuuid(micros)) < timeuuid_sort_key(min_timeuuid(micros + 1))


def test_parse_cql_types() -> None:
    ut = udt("ut", [("a", parse_cql_type("int")), ("b", parse_cql_type("text"))])
    assert parse_cql_type("frozen<map<int, list<text>>>").cql() == "frozen<map<int, list<text>>>"
    assert parse_cql_type("vector<float, 3>").dimension == 3
    assert parse_cql_type("list<frozen<ut>>", {"ut": ut}).params[0].frozen
    assert parse_cql_type("ks.ut", {"ut": ut}).is_multi_cell
    assert parse_cql_type("varchar").kind == "text"
    with pytest.raises(CqlTypeError, match="unknown type 'nope'"):
        parse_cql_type("map<int, nope>")


def test_log_columns_follow_the_reference_mapping() -> None:
    ut = udt("ut", [("a", parse_cql_type("int")), ("b", parse_cql_type("int")), ("c", parse_cql_type("int"))])
    cols = [
        Column("pk", parse_cql_type("int"), ColumnKind.PARTITION_KEY),
        Column("ck", parse_cql_type("int"), ColumnKind.CLUSTERING),
        Column("m", parse_cql_type("map<int, text>"), ColumnKind.REGULAR),
        Column("st", parse_cql_type("set<int>"), ColumnKind.REGULAR),
        Column("l", parse_cql_type("list<int>"), ColumnKind.REGULAR),
        Column("u", ut, ColumnKind.REGULAR),
        Column("fm", parse_cql_type("frozen<map<int, int>>"), ColumnKind.STATIC),
    ]
    columns = dict((name, t.cql()) for name, t in log_columns(TableSchema("ks", "c", tuple(cols))).all)
    assert columns == {
        "cdc$stream_id": "blob", "cdc$time": "timeuuid", "cdc$batch_seq_no": "int",
        "cdc$operation": "tinyint", "cdc$ttl": "bigint", "cdc$end_of_batch": "boolean",
        "pk": "int", "ck": "int",
        "m": "frozen<map<int, text>>", "cdc$deleted_m": "boolean", "cdc$deleted_elements_m": "frozen<set<int>>",
        "st": "frozen<set<int>>", "cdc$deleted_st": "boolean", "cdc$deleted_elements_st": "frozen<set<int>>",
        "l": "frozen<map<timeuuid, int>>", "cdc$deleted_l": "boolean",
        "cdc$deleted_elements_l": "frozen<set<timeuuid>>",
        "u": "frozen<ut>", "cdc$deleted_u": "boolean", "cdc$deleted_elements_u": "frozen<set<smallint>>",
        "fm": "frozen<map<int, int>>", "cdc$deleted_fm": "boolean",
    }
