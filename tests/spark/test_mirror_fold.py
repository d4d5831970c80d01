"""The mirror's fold (Python over Arrow, `bridge.spark.arrow_fold`) against the reference fold
(`bridge.spark.fold`): random changes of a few rows and their static rows (cells set and nulled,
element changes of a set, a map, a list and a UDT, inserts, updates, row deletes, snapshot rows,
often at the timestamp of another change of their row, out-of-order timestamps, replays, range and
partition deletes that arrive before or after the writes they cover), micro-batch after
micro-batch through `MirrorWriter.apply` into a Delta table; after each one the table equals the
reference's rows. And a table written before `_cdc_rank` existed gets it, its rows' positions read
as writes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.decode import Group, ValueFormat
from bridge.spark.fold import CELL_TS, MARKER, OFFSET, RANK, TS_US, fold
from bridge.spark.mirror import MirrorWriter, delta_schema
from bridge.spark.mirror_frames import MirrorColumns
from bridge.spark.shape import ColumnShape, TableShape

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
ELEMENTS = {
    "l": T.StructType([T.StructField("added", T.ArrayType(LIST_ENTRY)),
                       T.StructField("removed", T.ArrayType(T.StringType()))]),
    "m": T.StructType([T.StructField("added", T.ArrayType(ENTRY)),
                       T.StructField("removed", T.ArrayType(T.IntegerType()))]),
    "s": T.StructType([T.StructField("added", T.ArrayType(T.IntegerType())),
                       T.StructField("removed", T.ArrayType(T.IntegerType()))]),
    "u": T.StructType([T.StructField("added", UDT), T.StructField("removed", T.ArrayType(T.StringType()))]),
}


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
        row.update({name: {"value": _cell(rng, name)} for name in ("d", "l", "m", "s", "u", "v")})
    elif op != "d":
        for name in ("d", "l", "m", "s", "u", "v"):
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


def _connect(row: dict[str, Any]) -> dict[str, Any]:
    """A Delta row (asDict) in the reference's representation."""
    out = {}
    for name, value in row.items():
        if name == "d" and value is not None:
            out[name] = (value - __import__("datetime").date(1970, 1, 1)).days
        elif name == "m" and value is not None:
            out[name] = [{"key": k, "value": value[k]} for k in sorted(value)]
        elif name == "u" and value is not None:
            out[name] = value.asDict()
        elif name == CELL_TS:
            continue
        else:
            out[name] = value
    return out


@pytest.mark.parametrize("seed", [1, 5])  # seeds whose batches tell every rank rule apart
def test_arrow_fold_equals_the_reference_fold(spark: Any, tmp_path: Path, seed: int) -> None:
    """Six micro-batches of random changes of 8 rows and 2 static rows in 2 partitions: after
    each, the Delta table's rows (values, marker, position) equal the reference fold's."""
    rng = random.Random(seed)
    writer = MirrorWriter(str(tmp_path / "mirror"), f"fold-{seed}", ValueFormat.JSON_SCHEMAS)
    shape = TableShape(COLUMNS, ROW)
    spec = None
    reference: dict[tuple[int, int | None], dict[str, Any]] = {}
    stored_deletes: list[dict[str, Any]] = []
    sent: list[tuple[int, dict[str, Any]]] = []
    offset = 0
    times: dict[tuple[int, int | None], list[int]] = {}  # the timestamps each row's changes had
    stored_ranks: set[int] = set()
    static_rows = 0
    for batch_id in range(6):
        changes: list[tuple[int, dict[str, Any]]] = []
        for _ in range(rng.randrange(4, 14)):
            offset += 1
            key = (rng.randrange(2), None if rng.random() < 0.15 else rng.randrange(4))
            change = _change(rng, key[0], key[1], 100 + rng.randrange(60))
            if change["op"] == "r" and times.get(key) and rng.random() < 0.6:  # at another change's timestamp
                change["source"]["ts_us"] = rng.choice(times[key])
            times.setdefault(key, []).append(change["source"]["ts_us"])
            changes.append((offset, change))
            if change["op"] == "r" and rng.random() < 0.5:  # a change of its timestamp after it in the topic
                offset += 1
                changes.append((offset, _change(rng, key[0], key[1], change["source"]["ts_us"], "u")))
        if sent and rng.random() < 0.5:  # a replay of earlier changes (a re-run after a crash)
            changes += rng.sample(sent, min(3, len(sent)))
        sent += changes
        dropped = []
        for _ in range(rng.randrange(3)):
            offset += 1
            dropped.append({**_dropped(rng, rng.randrange(2), 100 + rng.randrange(60)), "offset": offset})
        frame = spark.createDataFrame([(o, orjson.dumps(c).decode()) for o, c in changes], "offset long, text string")
        group = Group("p.ks.t", "envelope", frame.select("offset", F.from_json("text", ENV).alias("env")), ENV, shape)
        writer.apply(spark, ("ks", "t"), [group], dropped, batch_id)
        # the reference, as the mirror applied it before: per touched row, all deletes of its partition
        spec = MirrorColumns(COLUMNS).fold_spec()
        stored_deletes += dropped
        events: dict[tuple[int, int | None], list[dict[str, Any]]] = {}
        for off, change in changes:
            after = change["after"] or change["before"]
            events.setdefault((after["pk"], after["ck"]), []).append({
                "op": change["op"], "ts": change["source"]["ts_us"], "offset": off, "after": change["after"]})
        touched = set(events) | {k for k in reference if any(d["key"]["pk"] == k[0] for d in dropped)}
        for key in touched:
            partition = [d for d in stored_deletes if d["key"]["pk"] == key[0]]
            result = fold(spec, reference.get(key), events.get(key, []) + partition)
            if result.action == "upsert":
                assert result.row is not None
                reference[key] = result.row
            elif result.action == "delete":
                del reference[key]
        table = spark.read.format("delta").load(str(tmp_path / "mirror" / "ks" / "t"))
        got = {(r["pk"], r["ck"]): _connect(r.asDict()) for r in table.collect()}
        want = {k: {n: v for n, v in row.items() if n != CELL_TS} for k, row in reference.items()}
        for row in want.values():
            row[MARKER] = bool(row[MARKER])
            row["s"] = sorted(row["s"]) if row["s"] is not None else None
            row["u"] = {"a": None, "b": None, **row["u"]} if row["u"] is not None else None  # a struct has every field
        differing = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
        assert not differing, f"batch {batch_id}: (mirror, reference) {differing}"
        assert all(TS_US in r and OFFSET in r and RANK in r for r in got.values())
        stored_ranks |= {r[RANK] for r in got.values()}
        static_rows += sum(1 for k in got if k[1] is None)
    assert stored_ranks == {0, 1} and static_rows, "positions of writes and snapshot rows, static rows were stored"


def test_a_table_written_before_the_rank_column_gets_it(spark: Any, tmp_path: Path) -> None:
    """A mirror table without `_cdc_rank` (an earlier version's): the column is added, a stored
    row's position reads as a write's, so a snapshot row of its timestamp applies and a replay or
    an append of that timestamp does not."""
    import datetime

    root = tmp_path / "mirror"
    schema = T.StructType([f for f in delta_schema(MirrorColumns(COLUMNS)).fields if f.name != RANK])
    stored = {"ck": 0, "pk": 0, "d": datetime.date(1970, 1, 3), "l": [1], "m": None, "s": None, "u": None, "v": 1,
              MARKER: True, TS_US: 100, OFFSET: 5, CELL_TS: {"": 100, "d": 100, "l": 100, "v": 100}}
    spark.createDataFrame([stored], schema).write.format("delta").save(str(root / "ks" / "t"))
    writer = MirrorWriter(str(root), "old-table", ValueFormat.JSON_SCHEMAS)
    shape = TableShape(COLUMNS, ROW)

    def apply(batch_id: int, changes: list[tuple[int, dict[str, Any]]]) -> None:
        frame = spark.createDataFrame([(o, orjson.dumps(c).decode()) for o, c in changes], "offset long, text string")
        group = Group("p.ks.t", "envelope", frame.select("offset", F.from_json("text", ENV).alias("env")), ENV, shape)
        writer.apply(spark, ("ks", "t"), [group], [], batch_id)

    def append(value: int) -> dict[str, Any]:
        return {"op": "u", "source": {"ts_us": 100}, "before": None,
                "after": {"pk": 0, "ck": 0, "l__elements": {"added": [{"key": "k", "value": value}], "removed": None}}}

    snapshot = {"op": "r", "source": {"ts_us": 100}, "before": None, "after": {
        "pk": 0, "ck": 0, "d": {"value": None}, "l": {"value": [1, 2]}, "m": {"value": None}, "s": {"value": None},
        "u": {"value": None}, "v": {"value": 3}}}
    apply(0, [(5, append(2)), (6, snapshot)])  # a replay of the stored change, then the snapshot row
    apply(1, [(7, append(2))])  # an append the snapshot row holds
    rows = spark.read.format("delta").load(str(root / "ks" / "t")).collect()
    assert len(rows) == 1
    row = rows[0].asDict()
    assert (row["l"], row["v"], row["d"], row[MARKER]) == ([1, 2], 3, None, True)
    assert (row[TS_US], row[RANK], row[OFFSET]) == (100, 1, 6)
