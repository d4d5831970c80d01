"""Random micro-batches of changes for the mirror's fold, and the rows the reference fold
(`bridge.spark.fold.reference`) gives for them: a few rows and their static rows in 2 partitions (cells set
and nulled, element changes of a set, a map, a list and a UDT, inserts, updates, row deletes,
snapshot rows, often at the timestamp of another change of their row, out-of-order timestamps,
replays, range and partition deletes that arrive before or after the writes they cover).

Shared by tests/spark/test_mirror_fold.py (the whole mirror: Spark, the Arrow fold, Delta) and
tests/unit/spark/test_arrow_fold.py (the Arrow fold alone over many more seeds), so both check
the same workloads against the same reference."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import types as T

from bridge.spark.core.shape import ColumnShape
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.fold.reference import CELL_TS, MARKER, FoldSpec, fold

ENTRY = T.StructType([T.StructField("key", T.IntegerType()), T.StructField("value", T.StringType())])
UDT = T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType())])
LIST_ENTRY = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.IntegerType())])
COLUMNS = (
    ColumnShape("ck", True, T.IntegerType()),
    ColumnShape("pk", True, T.IntegerType()),
    ColumnShape("d", False, T.IntegerType(), "date"),
    ColumnShape("l", False, T.ArrayType(T.IntegerType()), None, "list", True),
    ColumnShape("m", False, T.ArrayType(ENTRY), None, "map", True),
    ColumnShape("s", False, T.ArrayType(T.IntegerType()), None, "set", True),
    ColumnShape("u", False, UDT, None, "udt", True),
    ColumnShape("v", False, T.IntegerType()),
)
VALUE_NAMES = ("d", "l", "m", "s", "u", "v")
ELEMENTS = {
    "l": T.StructType([T.StructField("added", T.ArrayType(LIST_ENTRY)),
                       T.StructField("removed", T.ArrayType(T.StringType()))]),
    "m": T.StructType([T.StructField("added", T.ArrayType(ENTRY)),
                       T.StructField("removed", T.ArrayType(T.IntegerType()))]),
    "s": T.StructType([T.StructField("added", T.ArrayType(T.IntegerType())),
                       T.StructField("removed", T.ArrayType(T.IntegerType()))]),
    "u": T.StructType([T.StructField("added", UDT), T.StructField("removed", T.ArrayType(T.StringType()))]),
}

Key = tuple[int, int | None]  # (pk, ck); ck None: the partition's static row


def _row_type() -> T.StructType:
    fields = []
    for column in COLUMNS:
        if column.is_key:
            fields.append(T.StructField(column.name, column.spark_type))
            continue
        fields.append(T.StructField(column.name, T.StructType([T.StructField("value", column.spark_type)])))
        if column.name in ELEMENTS:
            fields.append(T.StructField(column.name + "__elements", ELEMENTS[column.name]))
    return T.StructType(fields)


ROW = _row_type()
ENV = T.StructType([T.StructField("op", T.StringType()),
                    T.StructField("source", T.StructType([T.StructField("ts_us", T.LongType())])),
                    T.StructField("before", ROW), T.StructField("after", ROW)])


def _cell(rng: random.Random, name: str) -> Any:
    """A random cell value of column `name` (Connect representation), sometimes null."""
    if rng.random() < 0.25:
        return None
    if name in ("v", "d"):
        return rng.randrange(5)
    if name in ("l", "s"):
        return sorted({rng.randrange(6) for _ in range(rng.randrange(3))}) if name == "s" else \
            [rng.randrange(6) for _ in range(rng.randrange(3))]
    if name == "m":
        return [{"key": k, "value": f"x{rng.randrange(3)}"} for k in sorted({rng.randrange(5) for _ in range(2)})]
    return {"a": rng.choice([None, 1, 2]), "b": rng.choice([None, "p", "q"])}


def _elements(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "s":
        return {"added": [rng.randrange(6)] if rng.random() < 0.7 else None, "removed": [rng.randrange(6)]}
    if name == "m":
        return {"added": [{"key": rng.randrange(5), "value": f"e{rng.randrange(3)}"}], "removed": [rng.randrange(5)]}
    if name == "l":
        return {"added": [{"key": "t", "value": rng.randrange(9)}], "removed": None}
    return {"added": {"a": rng.choice([None, 3]), "b": rng.choice([None, "z"])}, "removed": rng.choice([[], ["a"]])}


def _change(rng: random.Random, pk: int, ck: int | None, ts: int, op: str | None = None) -> dict[str, Any]:
    op = op or rng.choices(["c", "u", "d", "r"], [3, 5, 1, 2])[0]
    row: dict[str, Any] = {"pk": pk, "ck": ck}
    if op == "r":  # a snapshot row: every column a cell, collections whole, no element changes
        row.update({name: {"value": _cell(rng, name)} for name in VALUE_NAMES})
    elif op != "d":
        for name in VALUE_NAMES:
            roll = rng.random()
            if roll < 0.3:
                row[name] = {"value": _cell(rng, name)}
            elif roll < 0.5 and name in ELEMENTS:
                row[name + "__elements"] = _elements(rng, name)
    return {"op": op, "source": {"ts_us": ts}, "before": {"pk": pk, "ck": ck} if op == "d" else None,
            "after": row if op != "d" else None}


def _dropped(rng: random.Random, pk: int, ts: int) -> dict[str, Any]:
    if rng.random() < 0.3:
        return {"kind": "partition_delete", "ts": ts, "offset": 0, "key": {"ck": None, "pk": pk},
                "start": None, "start_inclusive": None, "end": None, "end_inclusive": None}
    low = rng.randrange(4)
    return {"kind": "range_delete", "ts": ts, "offset": 0, "key": {"ck": None, "pk": pk},
            "start": {"ck": low}, "start_inclusive": rng.random() < 0.5,
            "end": {"ck": low + rng.randrange(3)} if rng.random() < 0.7 else None, "end_inclusive": rng.random() < 0.5}


@dataclass
class MicroBatch:
    changes: list[tuple[int, dict[str, Any]]]  # (offset, envelope), replays included
    dropped: list[dict[str, Any]]  # range / partition deletes, each with its own offset


@dataclass
class Workload:
    """The micro-batches of one seed, one at a time: 4-13 changes of 8 rows and 2 static rows,
    sometimes a replay of 3 earlier ones, 0-2 range / partition deletes."""

    rng: random.Random
    offset: int = 0
    sent: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    times: dict[Key, list[int]] = field(default_factory=dict)  # the timestamps each row's changes had

    def next_batch(self) -> MicroBatch:
        rng = self.rng
        changes: list[tuple[int, dict[str, Any]]] = []
        for _ in range(rng.randrange(4, 14)):
            self.offset += 1
            key = (rng.randrange(2), None if rng.random() < 0.15 else rng.randrange(4))
            change = _change(rng, key[0], key[1], 100 + rng.randrange(60))
            if change["op"] == "r" and self.times.get(key) and rng.random() < 0.6:  # at another change's timestamp
                change["source"]["ts_us"] = rng.choice(self.times[key])
            self.times.setdefault(key, []).append(change["source"]["ts_us"])
            changes.append((self.offset, change))
            if change["op"] == "r" and rng.random() < 0.5:  # a change of its timestamp after it in the topic
                self.offset += 1
                changes.append((self.offset, _change(rng, key[0], key[1], change["source"]["ts_us"], "u")))
        if self.sent and rng.random() < 0.5:  # a replay of earlier changes (a re-run after a crash)
            changes += rng.sample(self.sent, min(3, len(self.sent)))
        self.sent += changes
        dropped = []
        for _ in range(rng.randrange(3)):
            self.offset += 1
            dropped.append({**_dropped(rng, rng.randrange(2), 100 + rng.randrange(60)), "offset": self.offset})
        return MicroBatch(changes, dropped)


def key_of(change: dict[str, Any]) -> Key:
    row = change["after"] or change["before"]
    return (row["pk"], row["ck"])


def data_events(changes: list[tuple[int, dict[str, Any]]]) -> dict[Key, list[dict[str, Any]]]:
    """The changes as the reference fold's events, per row."""
    events: dict[Key, list[dict[str, Any]]] = {}
    for off, change in changes:
        events.setdefault(key_of(change), []).append(
            {"op": change["op"], "ts": change["source"]["ts_us"], "offset": off, "after": change["after"]})
    return events


@dataclass
class ReferenceMirror:
    """The mirror's rows as the reference fold gives them, micro-batch after micro-batch: per
    touched row (a change of it, or a delete in its partition), its stored row, its changes and
    every delete of its partition so far."""

    spec: FoldSpec = field(default_factory=lambda: MirrorColumns(COLUMNS).fold_spec())
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)
    deletes: list[dict[str, Any]] = field(default_factory=list)

    def touched(self, batch: MicroBatch) -> set[Key]:
        """The rows a micro-batch may change: those it has changes of, and the stored rows of the
        partitions its deletes are in."""
        partitions = {d["key"]["pk"] for d in batch.dropped}
        return {key_of(c) for _, c in batch.changes} | {k for k in self.rows if k[0] in partitions}

    def apply(self, batch: MicroBatch) -> None:
        touched = self.touched(batch)
        self.deletes += batch.dropped
        events = data_events(batch.changes)
        for key in touched:
            partition = [d for d in self.deletes if d["key"]["pk"] == key[0]]
            result = fold(self.spec, self.rows.get(key), events.get(key, []) + partition)
            if result.action == "upsert":
                assert result.row is not None
                self.rows[key] = result.row
            elif result.action == "delete":
                del self.rows[key]

    def expected(self) -> dict[Key, dict[str, Any]]:
        """The rows without their cell timestamps, as a table row reads back: a boolean marker,
        a set sorted, a UDT with every field."""
        want = {k: {n: v for n, v in row.items() if n != CELL_TS} for k, row in self.rows.items()}
        for row in want.values():
            row[MARKER] = bool(row[MARKER])
            row["s"] = sorted(row["s"]) if row["s"] is not None else None
            row["u"] = {"a": None, "b": None, **row["u"]} if row["u"] is not None else None
        return want
