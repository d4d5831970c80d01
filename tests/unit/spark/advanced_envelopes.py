"""Advanced-format records (`cdc.output.format=advanced`) built by hand, as reference/connector.md
2.2-2.9 describes the Java connector 2.x's: plain values (no cell, no `X__elements`), `before` /
`after` only from pre-/post-images, key columns in them only with `payload-before` /
`payload-after`, the `<payload-key-name>` struct with `payload-key`, the Kafka key only with
`kafka-key`, a delete followed by a tombstone. Sets and lists are arrays, maps arrays of
`{key, value}` structs, UDTs structs. They go through the worker's own serializers (JSON with or
without schemas, Avro), so the jobs read the bytes a worker writes.

Table `(pk int, ck int, v int, t text, s set<int>, m map<int, text>, u frozen<udt{a int, b text}>,
d date, PRIMARY KEY (pk, ck))`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.records import KafkaRecord
from bridge.envelope.source_info import SOURCE_SCHEMA, TRANSACTION_SCHEMA

KEY_COLUMNS = ("pk", "ck")
VALUE_COLUMNS = ("v", "t", "s", "m", "u", "d")
DEFAULT_PLACEMENT = frozenset({"kafka-key", "payload-after", "payload-before"})
Row = dict[str, Any]


@dataclass(frozen=True)
class AdvancedTable:
    prefix: str
    keyspace: str
    table: str
    placement: frozenset[str] = DEFAULT_PLACEMENT
    payload_key_name: str = "key"

    @property
    def topic(self) -> str:
        return f"{self.prefix}.{self.keyspace}.{self.table}"

    def _name(self, suffix: str) -> str:
        return f"{self.topic}.{suffix}"

    def key_schema(self) -> cs.ConnectSchema:
        return cs.struct(self._name("Key"), [cs.ConnectField(n, cs.primitive(cs.INT32)) for n in KEY_COLUMNS],
                         optional=False)

    def _row_schema(self, side: str) -> cs.ConnectSchema:
        keys = [cs.ConnectField(n, cs.primitive(cs.INT32)) for n in KEY_COLUMNS] \
            if f"payload-{side.lower()}" in self.placement else []
        entry = cs.struct(self._name("MapEntry_int_text"), [cs.ConnectField("key", cs.primitive(cs.INT32)),
                                                           cs.ConnectField("value", cs.primitive(cs.STRING))],
                          optional=True)
        udt = cs.struct(self._name("UDT_pair"), [cs.ConnectField("a", cs.primitive(cs.INT32)),
                                                 cs.ConnectField("b", cs.primitive(cs.STRING))], optional=True)
        values = [cs.ConnectField("v", cs.primitive(cs.INT32)), cs.ConnectField("t", cs.primitive(cs.STRING)),
                  cs.ConnectField("s", cs.array(cs.primitive(cs.INT32))), cs.ConnectField("m", cs.array(entry)),
                  cs.ConnectField("u", udt), cs.ConnectField("d", cs.date())]
        return cs.struct(self._name(side), keys + values, optional=True)

    def value_schema(self) -> cs.ConnectSchema:
        fields = [cs.ConnectField("source", SOURCE_SCHEMA), cs.ConnectField("before", self._row_schema("Before")),
                  cs.ConnectField("after", self._row_schema("After"))]
        if "payload-key" in self.placement:
            key = cs.struct(self._name("Key"), [cs.ConnectField(n, cs.primitive(cs.INT32)) for n in KEY_COLUMNS],
                            optional=True)
            fields.append(cs.ConnectField(self.payload_key_name, key))
        fields += [cs.ConnectField("op", cs.primitive(cs.STRING)), cs.ConnectField("ts_ms", cs.primitive(cs.INT64)),
                   cs.ConnectField("transaction", TRANSACTION_SCHEMA),
                   cs.ConnectField("ts_us", cs.primitive(cs.INT64)), cs.ConnectField("ts_ns", cs.primitive(cs.INT64))]
        return cs.struct(self._name("Envelope"), fields, optional=False)

    def _side(self, row: Row | None, side: str) -> Row | None:
        if row is None:
            return None
        keys = {n: row[n] for n in KEY_COLUMNS} if f"payload-{side}" in self.placement else {}
        return {**keys, **{n: row.get(n) for n in VALUE_COLUMNS}}

    def record(self, op: str, key: Row, ts_us: int, before: Row | None = None, after: Row | None = None,
               snapshot: str = "false") -> KafkaRecord:
        """One change of row `key` ({pk, ck}); `before` / `after` the images (None: not carried)."""
        source = {"version": "test", "connector": "scylla", "name": self.prefix, "ts_ms": ts_us // 1000,
                  "snapshot": snapshot, "db": self.keyspace, "sequence": None, "ts_us": ts_us,
                  "ts_ns": ts_us // 1000 * 1_000_000, "keyspace_name": self.keyspace, "table_name": self.table}
        value: Row = {"source": source, "before": self._side(before and {**key, **before}, "before"),
                      "after": self._side(after and {**key, **after}, "after")}
        if "payload-key" in self.placement:
            value[self.payload_key_name] = dict(key)
        value.update({"op": op, "ts_ms": ts_us // 1000 + 5, "transaction": None, "ts_us": None, "ts_ns": None})
        kafka_key = dict(key) if "kafka-key" in self.placement else None
        return KafkaRecord(self.topic, kafka_key, self.key_schema() if kafka_key is not None else None, value,
                           self.value_schema())

    def tombstone(self, key: Row) -> KafkaRecord:
        kafka_key = dict(key) if "kafka-key" in self.placement else None
        return KafkaRecord(self.topic, kafka_key, self.key_schema() if kafka_key is not None else None, None, None)


FULL_ROW_1 = {"v": 5, "t": "x", "s": [1, 2], "m": [{"key": 1, "value": "a"}], "u": {"a": 1, "b": "q"}, "d": 19884}
UPDATED_ROW_1 = {**FULL_ROW_1, "v": None, "t": "y", "s": [1, 2, 3]}
EMPTY = dict.fromkeys(VALUE_COLUMNS)


def full_after_history(table: AdvancedTable, base_us: int = 1_700_000_000_000_000) -> list[KafkaRecord]:
    """`cdc.include.after=full`, `cdc.include.before=none`: inserts and updates carry the
    post-image, deletes nothing but the key (then a tombstone), a snapshot row (`r`) the row."""
    k11, k12, k21, k31 = ({"pk": p, "ck": c} for p, c in ((1, 1), (1, 2), (2, 1), (3, 1)))
    return [
        table.record("c", k11, base_us + 1, after=FULL_ROW_1),
        table.record("u", k11, base_us + 2, after=UPDATED_ROW_1),
        table.record("c", k12, base_us + 3, after={**EMPTY, "v": 7}),
        table.record("d", k12, base_us + 4),
        table.tombstone(k12),
        table.record("c", k21, base_us + 5, after={**EMPTY, "v": 9, "m": [{"key": 2, "value": "b"}]}),
        table.record("r", k31, base_us + 6, after={**EMPTY, "t": "snap", "u": {"a": None, "b": "z"}},
                     snapshot="true"),
        table.record("u", k11, base_us + 7, after={**UPDATED_ROW_1, "v": 6}),
    ]


# The table once `full_after_history` is applied (key -> values).
FULL_AFTER_STATE: dict[tuple[int, int], Row] = {
    (1, 1): {**UPDATED_ROW_1, "v": 6},
    (2, 1): {**EMPTY, "v": 9, "m": [{"key": 2, "value": "b"}]},
    (3, 1): {**EMPTY, "t": "snap", "u": {"a": None, "b": "z"}},
}


def values_of(records: Iterable[KafkaRecord]) -> list[Row | None]:
    return [r.value for r in records]
