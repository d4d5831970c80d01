"""Golden tests of `cdc.include.primary-key.placement` in the advanced format, on the table of
`CdcIncludePkBase` (`id int PRIMARY KEY, name text`, images on, before=full, after=full):
insert, update, delete (a partition delete, no pre-image before Scylla 2026.1) + tombstone."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.envelope import connect_schema as cs
from bridge.envelope.errors import PlanError
from bridge.scylla.model import Operation as Op
from tests.unit.envelope.advanced_support import ALL_PLACEMENTS, advanced_plan, data, events
from tests.unit.envelope.support import make_table, row

TABLE = make_table([("id", "int")], regular=[("name", "text")])
SOURCE = {"connector": "scylla", "name": "P", "snapshot": "false", "db": "ks", "keyspace_name": "ks",
          "table_name": "t"}


def insert(plan: Any, pk: int, name: str) -> list[dict[str, Any]]:
    return events(plan, row(Op.INSERT, id=pk, name=name), row(Op.POST_IMAGE, id=pk, name=name))


def update(plan: Any, pk: int, old: str, new: str) -> list[dict[str, Any]]:
    return events(plan, row(Op.PRE_IMAGE, id=pk, name=old), row(Op.UPDATE, id=pk, name=new),
                  row(Op.POST_IMAGE, id=pk, name=new))


def delete(plan: Any, pk: int) -> list[dict[str, Any]]:
    return events(plan, row(Op.PARTITION_DELETE, id=pk))


def test_all_locations() -> None:
    """CdcIncludePkAllLocationsIT (74d336e; v2.0.0 the same): the key in the Kafka key, in
    `after` and `before`, in the payload `key` field and in a `pk.id` header; the delete has
    before and after null and is followed by a tombstone with the same key (and headers)."""
    plan = advanced_plan(TABLE, "full", "full", ALL_PLACEMENTS)
    [ins] = insert(plan, 7, "test_7")
    assert ins["key"] == {"id": 7}
    assert ins["headers"] == {"pk.id": b"7"}
    assert data(ins) == {"source": SOURCE, "before": None, "after": {"id": 7, "name": "test_7"},
                         "key": {"id": 7}, "op": "c"}
    [upd] = update(plan, 7, "before_7", "after_7")
    assert data(upd) == {"source": SOURCE, "before": {"id": 7, "name": "before_7"},
                         "after": {"id": 7, "name": "after_7"}, "key": {"id": 7}, "op": "u"}
    dele, tomb = delete(plan, 7)
    assert data(dele) == {"source": SOURCE, "before": None, "after": None, "key": {"id": 7}, "op": "d"}
    assert tomb == {"key": {"id": 7}, "value": None, "headers": {"pk.id": b"7"}}
    assert list(ins["value"]) == ["source", "before", "after", "key", "op", "ts_ms", "transaction", "ts_us", "ts_ns"]
    assert ins["value"]["ts_us"] is None and ins["value"]["ts_ns"] is None  # generalizedEnvelope leaves them


def test_default_placement() -> None:
    """CdcIncludePkDefaultIT: `kafka-key,payload-after,payload-before`, no `key` field in the
    envelope (its schema has none), no headers."""
    plan = advanced_plan(TABLE, "full", "full")
    assert plan.value_schema.field_names == ("source", "before", "after", "op", "ts_ms", "transaction", "ts_us",
                                             "ts_ns")
    [upd] = update(plan, 3, "before_3", "after_3")
    assert upd["key"] == {"id": 3} and upd["headers"] == {}
    assert data(upd) == {"source": SOURCE, "before": {"id": 3, "name": "before_3"},
                         "after": {"id": 3, "name": "after_3"}, "op": "u"}


def test_kafka_key_only() -> None:
    """CdcIncludePkKafkaKeyOnlyIT: the key only in the Kafka key; `before`/`after` have no `id`
    field at all (their schemas lack it), and the delete's value carries no row identity."""
    plan = advanced_plan(TABLE, "full", "full", "kafka-key")
    assert plan.after_schema.field_names == ("name",)
    [ins] = insert(plan, 4, "test_4")
    assert ins["key"] == {"id": 4}
    assert data(ins) == {"source": SOURCE, "before": None, "after": {"name": "test_4"}, "op": "c"}
    [upd] = update(plan, 4, "before_4", "after_4")
    assert data(upd)["before"] == {"name": "before_4"} and data(upd)["after"] == {"name": "after_4"}
    dele, tomb = delete(plan, 4)
    assert dele["key"] == {"id": 4} and data(dele)["before"] is None and tomb["value"] is None


def test_payload_key_only() -> None:
    """CdcIncludePkPayloadKeyOnlyIT: `kafka-key,payload-key`: the key in the Kafka key and the
    envelope's `key` field (between `after` and `op`), not in `before`/`after`."""
    plan = advanced_plan(TABLE, "full", "full", "kafka-key,payload-key")
    [upd] = update(plan, 5, "before_5", "after_5")
    assert data(upd) == {"source": SOURCE, "before": {"name": "before_5"}, "after": {"name": "after_5"},
                         "key": {"id": 5}, "op": "u"}
    dele, _ = delete(plan, 5)
    assert data(dele) == {"source": SOURCE, "before": None, "after": None, "key": {"id": 5}, "op": "d"}


def test_without_kafka_key_the_kafka_key_is_null() -> None:
    """No connector test places the key elsewhere only (every IT keeps kafka-key). The emitter's
    `createKeyStruct` returns null without kafka-key; we write a null Kafka key (no schema), and
    the tombstone keeps that null key, as Debezium's EventDispatcher copies the delete's key."""
    plan = advanced_plan(TABLE, "full", "full", "payload-key,kafka-headers")
    assert plan.key_schema is None
    [ins] = insert(plan, 6, "x")
    assert ins["key"] is None and ins["headers"] == {"pk.id": b"6"} and data(ins)["key"] == {"id": 6}
    dele, tomb = delete(plan, 6)
    assert dele["key"] is None and tomb == {"key": None, "value": None, "headers": {"pk.id": b"6"}}


def test_payload_key_name() -> None:
    """`cdc.include.primary-key.payload-key-name` names the field (ScyllaSchema
    `payloadKeyFieldName`); a name that is already an envelope field is refused."""
    plan = advanced_plan(TABLE, placement="kafka-key,payload-key", cdc_include_primary_key_payload_key_name="pk")
    assert plan.value_schema.field_names[3] == "pk"
    assert plan.value_schema.field("pk").schema is plan.struct_key_schema
    with pytest.raises(PlanError, match="payload-key-name"):
        advanced_plan(TABLE, placement="kafka-key,payload-key", cdc_include_primary_key_payload_key_name="op")


def test_payload_diff_is_accepted_and_does_nothing() -> None:
    """KafkaConnectUtils.DEFAULT_PK_PLACEMENT lists payload-diff; the connector reserves it."""
    with_diff = advanced_plan(TABLE, "full", "full", ALL_PLACEMENTS + ",payload-diff")
    assert with_diff.value_schema == advanced_plan(TABLE, "full", "full", ALL_PLACEMENTS).value_schema


def test_schemas() -> None:
    """ScyllaSchema.computeDataCollectionSchema: `P.Key` required, `P.Before`/`P.After`
    optional with optional plain fields, `P.Envelope` required."""
    plan = advanced_plan(TABLE, "full", "full", ALL_PLACEMENTS)
    assert plan.struct_key_schema == cs.struct("P.ks.t.Key", [cs.ConnectField("id", cs.primitive(cs.INT32))], False)
    fields = [cs.ConnectField("id", cs.primitive(cs.INT32)), cs.ConnectField("name", cs.primitive(cs.STRING))]
    assert plan.before_schema == cs.struct("P.ks.t.Before", fields, True)
    assert plan.after_schema == cs.struct("P.ks.t.After", fields, True)
    assert plan.value_schema.name == "P.ks.t.Envelope" and not plan.value_schema.optional
