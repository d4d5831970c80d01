"""Avro: the AvroConverter (AvroData) form of the schemas, the Confluent framing, the union
branch hints, and schema evolution when a column is added."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest

from bridge.envelope import connect_schema as cs
from bridge.envelope.avro_encoder import compile_encoder
from bridge.envelope.avro_schema import avro_schema
from bridge.envelope.avro_serializer import AvroSerializer
from bridge.envelope.errors import SerializationError
from bridge.envelope.types import Float32, Float64
from bridge.scylla.model import Operation
from bridge_devstack.testing import InProcessRegistry
from tests.unit.envelope.support import (
    ENVELOPE_FIELDS,
    fastavro_bytes,
    make_table,
    plan_for,
    row,
    run,
)


def test_primitive_logical_and_named_types() -> None:
    schema = cs.struct(
        "P.ks.t.After",
        [
            cs.ConnectField("a", cs.primitive(cs.INT8)),
            cs.ConnectField("b", cs.primitive(cs.INT16, optional=False)),
            cs.ConnectField("c", cs.primitive(cs.INT64)),
            cs.ConnectField("d", cs.date()),
            cs.ConnectField("e", cs.timestamp()),
            cs.ConnectField("f", cs.debezium_enum("x,y", "y")),
            cs.ConnectField("g", cs.array(cs.primitive(cs.FLOAT32))),
            cs.ConnectField("h", cs.primitive(cs.BYTES)),
        ],
        True,
    )
    assert avro_schema(schema) == [
        "null",
        {
            "type": "record",
            "name": "After",
            "namespace": "P.ks.t",
            "fields": [
                {"name": "a", "type": ["null", {"type": "int", "connect.type": "int8"}], "default": None},
                {"name": "b", "type": {"type": "int", "connect.type": "int16"}},
                {"name": "c", "type": ["null", "long"], "default": None},
                {
                    "name": "d",
                    "type": [
                        "null",
                        {
                            "type": "int",
                            "connect.version": 1,
                            "connect.name": "org.apache.kafka.connect.data.Date",
                            "logicalType": "date",
                        },
                    ],
                    "default": None,
                },
                {
                    "name": "e",
                    "type": [
                        "null",
                        {
                            "type": "long",
                            "connect.version": 1,
                            "connect.name": "org.apache.kafka.connect.data.Timestamp",
                            "logicalType": "timestamp-millis",
                        },
                    ],
                    "default": None,
                },
                {
                    "name": "f",
                    "type": [
                        {
                            "type": "string",
                            "connect.version": 1,
                            "connect.parameters": {"allowed": "x,y"},
                            "connect.default": "y",
                            "connect.name": "io.debezium.data.Enum",
                        },
                        "null",
                    ],
                    "default": "y",
                },
                {"name": "g", "type": ["null", {"type": "array", "items": ["null", "float"]}], "default": None},
                {"name": "h", "type": ["null", "bytes"], "default": None},
            ],
            "connect.name": "P.ks.t.After",
        },
    ]


TABLE = make_table(
    partition=[("pk", "int")],
    clustering=[("ck", "int")],
    regular=[("v", "text"), ("m", "map<int, text>"), ("fm", "frozen<map<int, text>>")],
)
PLAN = plan_for(TABLE)


def test_envelope_schema_defines_each_named_type_once() -> None:
    envelope = avro_schema(PLAN.value_schema)
    assert (envelope["name"], envelope["namespace"], envelope["connect.name"]) == (
        "Envelope",
        "P.ks.t",
        "P.ks.t.Envelope",
    )
    fields = {f["name"]: f for f in envelope["fields"]}
    assert [f["name"] for f in envelope["fields"]] == ENVELOPE_FIELDS
    assert fields["source"]["type"]["name"] == "connector"
    assert fields["source"]["type"]["namespace"] == "com.scylladb.cdc.debezium"
    assert fields["transaction"]["type"][1]["name"] == "block"
    assert fields["transaction"]["type"][1]["connect.version"] == 1
    before = fields["before"]["type"][1]
    after_ref = fields["after"]["type"]
    assert before["name"] == "Before" and after_ref[1]["name"] == "After"
    after_fields = {f["name"]: f["type"] for f in after_ref[1]["fields"]}
    assert after_fields["v"] == ["null", "P.ks.t.v.Cell"]  # defined in Before, referenced here
    fastavro.parse_schema(envelope)  # valid Avro with every reference resolvable


def test_nested_records_inherit_their_namespace_as_avros_java_writer_leaves_it_out() -> None:
    """The registry stores the connector's text only if ours is the same: Avro's Java
    `Schema.toString` writes no namespace a record inherits and refers to a record of the
    enclosing namespace by its short name."""
    envelope = avro_schema(PLAN.value_schema)
    fields = {f["name"]: f for f in envelope["fields"]}
    before, after = fields["before"]["type"][1], fields["after"]["type"][1]
    assert "namespace" not in before and "namespace" not in after  # both in P.ks.t, as the Envelope
    assert {f["name"]: f["type"] for f in before["fields"]}["v"][1]["namespace"] == "P.ks.t.v"
    assert {"P.ks.t.Before", "P.ks.t.After"} <= set(fastavro.parse_schema(envelope)["__named_schemas"])
    inner = cs.struct("P.ks.t.Inner", [cs.ConnectField("a", cs.primitive(cs.INT32))], False)
    outer = cs.struct("P.ks.t.Outer", [cs.ConnectField("x", inner), cs.ConnectField("y", inner)], False)
    written = avro_schema(outer)
    assert [f["type"] for f in written["fields"]][1] == "Inner"  # a reference within the namespace
    assert written["fields"][0]["type"]["name"] == "Inner" and "namespace" not in written["fields"][0]["type"]
    top = cs.struct("Top", [cs.ConnectField("x", inner)], False)
    assert avro_schema(top)["fields"][0]["type"]["namespace"] == "P.ks.t"


def _decode(body: bytes, writer: Any, reader: Any | None = None) -> Any:
    return fastavro.schemaless_reader(
        io.BytesIO(body), fastavro.parse_schema(writer), reader and fastavro.parse_schema(reader)
    )


def test_confluent_framing_and_subjects() -> None:
    registry = InProcessRegistry()
    keys, values = AvroSerializer(registry, is_key=True), AvroSerializer(registry, is_key=False)
    key_id, value_id = keys.register("P.ks.t", PLAN.key_schema), values.register("P.ks.t", PLAN.value_schema)
    record = run(PLAN, row(Operation.INSERT, pk=1, ck=2, v="x")).records[0]
    key = keys.serialize("P.ks.t", record.key_schema, record.key)
    value = values.serialize("P.ks.t", record.value_schema, record.value)
    assert key is not None and value is not None
    assert key[0] == 0 and int.from_bytes(key[1:5], "big") == key_id
    assert value[0] == 0 and int.from_bytes(value[1:5], "big") == value_id
    assert keys.register("P.ks.t", PLAN.key_schema) == key_id and len(registry.ids) == 2  # once per schema
    assert sorted(registry.subjects) == ["P.ks.t-key", "P.ks.t-value"]
    assert _decode(key[5:], registry.schema(int.from_bytes(key[1:5], "big"))) == {"ck": 2, "pk": 1}
    assert values.serialize("P.ks.t", None, None) is None  # tombstone


def test_encoder_writes_the_bytes_fastavro_writes() -> None:
    """Edge values through the compiled encoder and through fastavro: identical bytes."""
    schema = cs.struct(
        "P.E",
        [
            cs.ConnectField("i64", cs.primitive(cs.INT64, optional=False)),
            cs.ConnectField("i8", cs.primitive(cs.INT8)),
            cs.ConnectField("s", cs.primitive(cs.STRING)),
            cs.ConnectField("b", cs.primitive(cs.BYTES)),
            cs.ConnectField("f", cs.primitive(cs.FLOAT32)),
            cs.ConnectField("d", cs.primitive(cs.FLOAT64)),
            cs.ConnectField("t", cs.primitive(cs.BOOLEAN)),
            cs.ConnectField("e", cs.debezium_enum("x,y", "y")),
            cs.ConnectField("a", cs.array(cs.struct("P.I", [cs.ConnectField("x", cs.primitive(cs.INT32))], True))),
            cs.ConnectField("aa", cs.array(cs.array(cs.primitive(cs.STRING)))),
            cs.ConnectField("c", cs.struct("P.C", [cs.ConnectField("value", cs.primitive(cs.STRING))], True)),
        ],
        False,
    )
    encode = compile_encoder(schema)
    values = [
        {"i64": 0, "i8": None, "s": None, "b": None, "f": None, "d": None, "t": None, "e": None, "a": None,
         "aa": None, "c": None},
        {"i64": -(2**63), "i8": -128, "s": "", "b": b"", "f": Float32(-0.0), "d": Float64(float("nan")),
         "t": False, "e": "x", "a": [], "aa": [[], ["z"]], "c": {"value": None}},
        {"i64": 2**63 - 1, "i8": 127, "s": "zażółć 😀" * 30, "b": bytes(range(256)), "f": Float32(1.5),
         "d": Float64(-1e300), "t": True, "e": "y", "a": [None, {"x": 2**31 - 1}, {"x": None}],
         "aa": [["a" * 200] * 70], "c": {"value": "v"}},
        {"i64": 1, "i8": 0, "s": "x" * 9000, "b": bytes(20000), "f": None, "d": None, "t": None, "e": None,
         "a": None, "aa": None, "c": {"value": "y" * 8192}},
    ]  # fmt: skip
    for value in values:
        out = bytearray()
        encode(out, value)
        assert bytes(out) == fastavro_bytes(value, schema)
    with pytest.raises(SerializationError, match=r"value does not fit schema P\.E"):
        encode(bytearray(), {**values[0], "s": 5})


def test_values_that_do_not_fit_the_schema_are_refused() -> None:
    serializer = AvroSerializer(InProcessRegistry(), is_key=True)
    serializer.register("P.ks.t", PLAN.key_schema)
    with pytest.raises(SerializationError, match=r"P\.ks\.t\.Key"):
        serializer.serialize("P.ks.t", PLAN.key_schema, {"ck": "not an int", "pk": 1})


def test_added_column_gives_a_compatible_new_schema() -> None:
    """ALTER TABLE ADD w: a new schema version (new id); old data reads with the new schema
    (w defaults to null) and new data with the old one (w ignored)."""
    altered = make_table(
        partition=[("pk", "int")],
        clustering=[("ck", "int")],
        regular=[("v", "text"), ("m", "map<int, text>"), ("fm", "frozen<map<int, text>>"), ("w", "int")],
    )
    new_plan = plan_for(altered)
    registry = InProcessRegistry()
    serializer = AvroSerializer(registry, is_key=False)
    serializer.register("P.ks.t", PLAN.value_schema)
    serializer.register("P.ks.t", new_plan.value_schema)
    old_record = run(PLAN, row(Operation.INSERT, pk=1, ck=1, v="old")).records[0]
    new_record = run(new_plan, row(Operation.INSERT, pk=1, ck=2, v="new", w=7)).records[0]
    old_bytes = serializer.serialize("P.ks.t", old_record.value_schema, old_record.value)
    new_bytes = serializer.serialize("P.ks.t", new_record.value_schema, new_record.value)
    assert old_bytes is not None and new_bytes is not None
    assert old_bytes[1:5] != new_bytes[1:5]
    assert len(registry.subjects["P.ks.t-value"]) == 2
    old_schema, new_schema = avro_schema(PLAN.value_schema), avro_schema(new_plan.value_schema)
    assert _decode(old_bytes[5:], old_schema, new_schema)["after"]["w"] is None
    assert _decode(new_bytes[5:], new_schema, old_schema)["after"]["v"] == {"value": "new"}
