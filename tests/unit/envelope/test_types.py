"""Every column type of connector.md section 2.5: its Connect schema, and the JSON of a value
(the connector's test values), through JSON with and without schemas and Avro."""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections import namedtuple
from typing import Any

import pytest
from cassandra.util import Date, Duration, OrderedMap, SortedSet, Time

from bridge.envelope.connect_schema import json_schema
from bridge.envelope.errors import PlanError, TranslationError
from bridge.envelope.types import map_type
from bridge.scylla.model import Operation
from bridge.scylla.schema import parse_cql_type, scalar, udt
from tests.unit.envelope.support import Wire, make_table, plan_for, row_with, run

UDT_AB = udt("ab", [("a", scalar("int")), ("b", scalar("text"))])
Ab = namedtuple("Ab", "a b")
OPTIONAL = {"optional": True}
STRING = {"type": "string", **OPTIONAL}
UUID_1 = uuid.UUID("11111111-1111-1111-1111-111111111111")
TIMEUUID_1 = uuid.UUID("d3b5a5c0-2722-11ef-8000-0123456789ab")

# (column type, driver value, JSON of the value, JsonConverter schema of the value)
CASES: list[tuple[str, Any, str, dict[str, Any]]] = [
    ("ascii", "ascii", '"ascii"', STRING),
    ("text", "", '""', STRING),
    ("varchar", "zażółć", '"zażółć"', STRING),
    ("tinyint", 5, "5", {"type": "int8", **OPTIONAL}),
    ("smallint", 7, "7", {"type": "int16", **OPTIONAL}),
    ("int", 42, "42", {"type": "int32", **OPTIONAL}),
    ("bigint", 1234567890123, "1234567890123", {"type": "int64", **OPTIONAL}),
    ("float", 2.718280076980591, "2.71828", {"type": "float", **OPTIONAL}),
    ("double", 3.14159, "3.14159", {"type": "double", **OPTIONAL}),
    ("double", 1e20, "1.0E20", {"type": "double", **OPTIONAL}),
    ("boolean", True, "true", {"type": "boolean", **OPTIONAL}),
    ("blob", bytes.fromhex("CAFEBABE"), '"yv66vg=="', {"type": "bytes", **OPTIONAL}),
    ("decimal", decimal.Decimal("12345.67"), '"12345.67"', STRING),
    ("decimal", decimal.Decimal("1E+3"), '"1E+3"', STRING),
    ("varint", 999999999, '"999999999"', STRING),
    ("varint", -(10**30), '"-1000000000000000000000000000000"', STRING),
    ("uuid", UUID_1, '"11111111-1111-1111-1111-111111111111"', STRING),
    ("timeuuid", TIMEUUID_1, '"d3b5a5c0-2722-11ef-8000-0123456789ab"', STRING),
    ("inet", "127.0.0.1", '"127.0.0.1"', STRING),
    ("inet", "::1", '"0:0:0:0:0:0:0:1"', STRING),
    ("duration", Duration(0, 1, (12 * 3600 + 30 * 60) * 10**9), '"1d12h30m"', STRING),
    (
        "date",
        Date(datetime.date(2024, 6, 10)),
        "19884",
        {"type": "int32", **OPTIONAL, "name": "org.apache.kafka.connect.data.Date", "version": 1},
    ),
    (
        "timestamp",
        datetime.datetime(2024, 6, 10, 12, 34, 56, 789000),
        "1718022896789",
        {"type": "int64", **OPTIONAL, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
    ),
    ("time", Time("12:34:56.789"), "45296789000000", {"type": "int64", **OPTIONAL}),
    (
        "frozen<list<int>>",
        [10, 20, 30],
        "[10,20,30]",
        {"type": "array", "items": {"type": "int32", **OPTIONAL}, **OPTIONAL},
    ),
    ("frozen<list<int>>", [], "[]", {"type": "array", "items": {"type": "int32", **OPTIONAL}, **OPTIONAL}),
    ("frozen<set<text>>", SortedSet(["x", "y", "z"]), '["x","y","z"]', {"type": "array", "items": STRING, **OPTIONAL}),
    (
        "frozen<map<int, text>>",
        OrderedMap([(1, "one")]),
        '[{"key":1,"value":"one"}]',
        {
            "type": "array",
            "items": {
                "type": "struct",
                "fields": [{"type": "int32", **OPTIONAL, "field": "key"}, {**STRING, "field": "value"}],
                "optional": False,
                "name": "P.ks.t.MapEntry_INT_VARCHAR",
            },
            **OPTIONAL,
        },
    ),
    (
        "tuple<int, text>",
        (1, "tuple1"),
        '{"field_0":1,"field_1":"tuple1"}',
        {
            "type": "struct",
            "fields": [{"type": "int32", **OPTIONAL, "field": "field_0"}, {**STRING, "field": "field_1"}],
            **OPTIONAL,
            "name": "P.ks.t.Tuple_INT_VARCHAR",
        },
    ),
    ("tuple<int, text>", (None, None), '{"field_0":null,"field_1":null}', {}),
    (
        "frozen<ab>",
        Ab(42, "foo"),
        '{"a":42,"b":"foo"}',
        {
            "type": "struct",
            "fields": [{"type": "int32", **OPTIONAL, "field": "a"}, {**STRING, "field": "b"}],
            **OPTIONAL,
            "name": "P.ks.t.UDT_ab",
        },
    ),
    ("frozen<ab>", Ab(None, None), "null", {}),
    (
        "vector<float, 2>",
        [1.5, 0.1],
        "[1.5,0.1]",
        {"type": "array", "items": {"type": "float", **OPTIONAL}, **OPTIONAL},
    ),
]


@pytest.mark.parametrize(("cql", "value", "expected_json", "expected_schema"), CASES)
def test_type_mapping(cql: str, value: Any, expected_json: str, expected_schema: dict[str, Any]) -> None:
    table = make_table(partition=[("pk", "int")], regular=[("v", cql)], udts={"ab": UDT_AB})
    plan = plan_for(table)
    translation = run(plan, row_with(Operation.UPDATE, {"pk": 1, "v": value}))
    wire = Wire()
    wire.check(translation.records[0])  # JSON on/off and Avro agree
    payload = wire.json_off.serialize("t", plan.value_schema, translation.records[0].value)
    assert payload is not None
    assert b'"after":{"pk":1,"v":{"value":' + expected_json.encode() + b"}}" in payload
    cell = plan.after_schema.field("v").schema
    assert cell.name == "P.ks.t.v.Cell" and cell.optional
    if expected_schema:
        assert json_schema(cell.field("value").schema) == expected_schema


@pytest.mark.parametrize(("cql", "value", "expected_json"), [(c[0], c[1], c[2]) for c in CASES if c[0] in (
    "ascii", "text", "int", "bigint", "uuid", "timeuuid", "timestamp", "date", "inet", "blob", "decimal",
)])  # fmt: skip
def test_key_columns_are_plain_values(cql: str, value: Any, expected_json: str) -> None:
    table = make_table(partition=[("k", cql)], regular=[("v", "int")])
    plan = plan_for(table)
    translation = run(plan, row_with(Operation.UPDATE, {"k": value, "v": 1}))
    key, _ = Wire().check(translation.records[0])
    assert Wire().json_off.serialize("t", plan.key_schema, translation.records[0].key) == (
        b'{"k":' + expected_json.encode() + b"}"
    )
    assert key is not None


def test_counter_maps_to_int64() -> None:
    assert json_schema(map_type(scalar("counter"), "P.").schema) == {"type": "int64", **OPTIONAL}


@pytest.mark.parametrize(
    ("cql", "value", "problem"),
    [
        ("int", 2**31, "int fitting int"),
        ("tinyint", 128, "int fitting tinyint"),
        ("int", "42", "expected int"),
        ("int", True, "expected int"),
        ("text", b"bytes", "expected str"),
        ("boolean", 1, "expected bool"),
        ("uuid", "11111111-1111-1111-1111-111111111111", "expected UUID"),
        ("inet", "not an address", "expected IP address"),
        ("decimal", decimal.Decimal("NaN"), "expected finite Decimal"),
        ("timestamp", 1718022896789, "expected datetime"),
        ("frozen<list<int>>", "abc", "expected list"),
        ("frozen<map<int, int>>", [1, 2], "expected map"),
        ("tuple<int, int>", (1, 2, 3), "3 components"),
    ],
)
def test_values_that_do_not_fit_raise_one_clear_error(cql: str, value: Any, problem: str) -> None:
    """The error names the table, stream, cdc$time, batch sequence number and column."""
    plan = plan_for(make_table(partition=[("pk", "int")], regular=[("v", cql)]))
    with pytest.raises(TranslationError) as raised:
        run(plan, row_with(Operation.UPDATE, {"pk": 1, "v": value}))
    message = str(raised.value)
    assert "ks.t stream 0x" in message
    assert "cdc$time " in message and "batch_seq_no 0 (operation UPDATE)" in message
    assert "column 'v'" in message and problem in message


def test_key_value_errors_name_the_key_column() -> None:
    plan = plan_for(make_table(partition=[("pk", "int")], regular=[("v", "int")]))
    with pytest.raises(TranslationError, match="column 'pk': expected int"):
        run(plan, row_with(Operation.ROW_DELETE, {"pk": "x"}))


def test_timezone_aware_timestamps_are_converted_to_utc() -> None:
    plan = plan_for(make_table(partition=[("pk", "int")], regular=[("v", "timestamp")]))
    aware = datetime.datetime(2024, 6, 10, 14, 34, 56, 789000, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    [value] = Wire().values(run(plan, row_with(Operation.UPDATE, {"pk": 1, "v": aware})))
    assert value["after"]["v"] == {"value": 1718022896789}


def test_unknown_types_are_refused_when_the_plan_is_built() -> None:
    from bridge.scylla.schema import Column, ColumnKind, CqlType, TableSchema

    table = TableSchema(
        "ks",
        "t",
        (Column("pk", scalar("int"), ColumnKind.PARTITION_KEY), Column("v", CqlType("weird"), ColumnKind.REGULAR)),
    )
    with pytest.raises(PlanError, match=r"ks\.t: unsupported CQL type weird"):
        plan_for(table)
    assert parse_cql_type("frozen<ab>", {"ab": UDT_AB}).frozen
