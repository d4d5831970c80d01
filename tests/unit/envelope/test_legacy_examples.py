"""The legacy-format examples of connector.md section 2.9, reproduced field for field (as the
connector's tests compare them: JSON without schemas, dynamic fields removed, no extra fields)."""

from __future__ import annotations

import uuid
from typing import Any

from bridge.envelope.records import Translation
from bridge.scylla.model import Operation
from tests.unit.envelope.support import Wire, d, make_table, plan_for, row, row_with, run

TABLE = make_table(
    partition=[("pk", "int")], clustering=[("ck", "int")], regular=[("v", "text")], keyspace="ks", name="t"
)
PLAN = plan_for(TABLE)
DYNAMIC_SOURCE_FIELDS = ("ts_ms", "ts_ns", "ts_us", "sequence", "version")
DYNAMIC_FIELDS = ("ts_ms", "ts_us", "ts_ns", "transaction")
EXPECTED_SOURCE = {
    "connector": "scylla",
    "name": "P",
    "snapshot": "false",
    "db": "ks",
    "keyspace_name": "ks",
    "table_name": "t",
}


def stripped(translation: Translation) -> list[tuple[Any, Any]]:
    """(key, value) per record with the dynamic fields removed, as the connector's tests do."""
    wire = Wire()
    out = []
    for record in translation.records:
        key, value = wire.check(record)
        if value is not None:
            assert set(value) == {"source", "before", "after", "op", *DYNAMIC_FIELDS}
            value = {k: v for k, v in value.items() if k not in DYNAMIC_FIELDS}
            value["source"] = {k: v for k, v in value["source"].items() if k not in DYNAMIC_SOURCE_FIELDS}
        out.append((key, value))
    return out


def test_insert() -> None:
    """INSERT -> "before":null,"after":{"ck":1,"pk":1,"v":{"value":"example row"}},"op":"c" """
    assert stripped(run(PLAN, row(Operation.INSERT, pk=1, ck=1, v="example row"))) == [
        (
            {"ck": 1, "pk": 1},
            {
                "source": EXPECTED_SOURCE,
                "before": None,
                "after": {"ck": 1, "pk": 1, "v": {"value": "example row"}},
                "op": "c",
            },
        )
    ]


def test_update_value_null_and_untouched() -> None:
    """SET v='new value' -> {"value":"new value"}; SET v=NULL -> {"value":null}; not touched -> null."""
    [(_, new_value)] = stripped(run(PLAN, row(Operation.UPDATE, pk=1, ck=1, v="new value")))
    assert new_value == {
        "source": EXPECTED_SOURCE,
        "before": None,
        "after": {"ck": 1, "pk": 1, "v": {"value": "new value"}},
        "op": "u",
    }
    [(_, set_null)] = stripped(run(PLAN, row_with(Operation.UPDATE, {"pk": 1, "ck": 1, d("v"): True})))
    assert set_null["after"] == {"ck": 1, "pk": 1, "v": {"value": None}}
    [(_, untouched)] = stripped(run(PLAN, row(Operation.INSERT, pk=1, ck=1)))
    assert untouched["after"] == {"ck": 1, "pk": 1, "v": None}


def test_delete_then_tombstone() -> None:
    """DELETE row -> "before":{"ck":1,"pk":1,"v":null},"after":null,"op":"d" + tombstone."""
    assert stripped(run(PLAN, row(Operation.ROW_DELETE, pk=1, ck=1))) == [
        (
            {"ck": 1, "pk": 1},
            {"source": EXPECTED_SOURCE, "before": {"ck": 1, "pk": 1, "v": None}, "after": None, "op": "d"},
        ),
        ({"ck": 1, "pk": 1}, None),
    ]


def test_composite_key_json() -> None:
    """PRIMARY KEY ((pk1, pk2), pk3, pk4): key {"pk1":1,"pk2":"alpha","pk3":"1111...","pk4":10}."""
    table = make_table(
        partition=[("pk1", "int"), ("pk2", "text")],
        clustering=[("pk3", "uuid"), ("pk4", "int")],
        regular=[("value_text", "text"), ("value_int", "int")],
    )
    pk3 = uuid.UUID("11111111-1111-1111-1111-111111111111")
    translation = run(plan_for(table), row(Operation.INSERT, pk1=1, pk2="alpha", pk3=pk3, pk4=10, value_text="first"))
    key_bytes = Wire().json_off.serialize("t", translation.records[0].key_schema, translation.records[0].key)
    assert key_bytes == b'{"pk1":1,"pk2":"alpha","pk3":"11111111-1111-1111-1111-111111111111","pk4":10}'


def test_key_fields_follow_the_log_table_column_order() -> None:
    """The connector lists key columns as the CDC log returns them (by name), so `ck` comes
    before `pk` - and the key bytes, hence the partition a row hashes to, match the connector's."""
    assert PLAN.key_schema.field_names == ("ck", "pk")
    assert all(f.schema.optional for f in PLAN.key_schema.fields)
