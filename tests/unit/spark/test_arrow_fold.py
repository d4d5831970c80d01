"""The mirror's Arrow fold (`bridge.spark.fold.arrow_fold.fold_batches`, the `mapInArrow` function of
`fold.events.fold_rows`) against the reference fold (`bridge.spark.fold.reference`), without a Spark
session: the random micro-batches of tests/unit/spark/mirror_changes.py over 200 seeds, each
micro-batch's events built as `fold.events` builds them (the stored row first, the changes in the
Delta table's representation, the covering deletes), sorted by key and position as `fold_rows`
sorts them and cut into Arrow batches at random places (a key's events then span two batches).
After each micro-batch the rows folded so far (values, marker, position, cell timestamps) equal
the reference's. tests/spark/test_mirror_fold.py runs one of these workloads through the whole
mirror (Spark, Delta)."""

from __future__ import annotations

import datetime
import itertools
import random
from collections import Counter
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from bridge.spark.fold.arrow_fold import DATA, DELETE, STORED, fold_batches
from bridge.spark.fold.events import ACTION, CELLS, FIRST, event_type, value_rule
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.fold.reference import CELL_TS, MARKER, OFFSET, RANK, ROW_MARKER, TS_US, fold, in_range, rank
from tests.unit.spark.mirror_changes import COLUMNS, Key, MicroBatch, ReferenceMirror, Workload, data_events

MIRROR = MirrorColumns(COLUMNS)
KEYS, VALUES = MIRROR.keys, MIRROR.values
SCHEMA = to_arrow_schema(T.StructType([*(T.StructField(c.name, c.spark_type) for c in KEYS),
                                       T.StructField("x", event_type(VALUES)),
                                       T.StructField(CELLS, T.MapType(T.StringType(), T.LongType()))]),
                         timezone="UTC")
EPOCH = datetime.date(1970, 1, 1)
SEEDS = 200


def _delta(name: str, value: Any) -> Any:
    """A Connect value of column `name` in the Delta table's representation (as `data_event`
    converts it): dates as dates, maps as (key, value) pairs, empty collections as null."""
    if value is None:
        return None
    if name == "d":
        return EPOCH + datetime.timedelta(days=value)
    if name in ("l", "m", "s") and not value:
        return None
    if name == "m":
        return [(e["key"], e["value"]) for e in value]
    return value


def _added(name: str, added: Any) -> Any:
    # list appends arrive as `{key, value}` entries; the fold takes their values
    return [e["value"] for e in added] if name == "l" and added is not None else added


def _data_event(event: dict[str, Any], key: Key) -> dict[str, Any]:
    after = event["after"] or {}
    x: dict[str, Any] = {"ts": event["ts"], "rank": rank(event), "off": event["offset"], "kind": DATA,
                         "op": event["op"], "m": event["op"] in ("c", "r") and key[1] is not None}
    for i, column in enumerate(VALUES):
        cell = after.get(column.name)
        if cell is not None:
            x[f"c{i}"], x[f"v{i}"] = True, _delta(column.name, cell["value"])
        elements = after.get(column.name + "__elements")
        if elements is not None:
            x[f"e{i}"], x[f"a{i}"], x[f"r{i}"] = True, _added(column.name, elements["added"]), elements["removed"]
    return x


def _stored_event(row: dict[str, Any]) -> dict[str, Any]:
    cell_ts = row[CELL_TS]
    x = {"ts": FIRST, "rank": 0, "off": 0, "kind": STORED, "m": row[MARKER], "mts": cell_ts.get(ROW_MARKER),
         "pts": row[TS_US], "prk": row[RANK], "poff": row[OFFSET]}
    for i, column in enumerate(VALUES):
        x[f"v{i}"], x[f"t{i}"] = row[column.name], cell_ts.get(column.name)
    return x


def _events(batch: MicroBatch, touched: set[Key], stored: dict[Key, dict[str, Any]],
            deletes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every event of the touched keys (key columns and `x`), sorted as `fold_rows` sorts them."""
    changes = data_events(batch.changes)
    rows = []
    for key in touched:
        if key in stored:
            rows.append({"pk": key[0], "ck": key[1], "x": _stored_event(stored[key]),
                         CELLS: list(stored[key][CELL_TS].items())})
        xs = [_data_event(event, key) for event in changes.get(key, [])]
        xs += [{"ts": d["ts"], "rank": rank(d), "off": d["offset"], "kind": DELETE}
               for d in deletes if in_range(MIRROR.fold_spec(), {"pk": key[0], "ck": key[1]}, d)]
        rows += [{"pk": key[0], "ck": key[1], "x": x} for x in xs]
    # Spark's order: keys (nulls first), then position
    return sorted(rows, key=lambda r: (r["pk"], r["ck"] is not None, r["ck"] or 0,
                                       r["x"]["ts"], r["x"]["rank"], r["x"]["off"]))


def _arrow_batches(rng: random.Random, rows: list[dict[str, Any]]) -> list[pa.RecordBatch]:
    cuts = sorted(rng.sample(range(1, len(rows)), min(len(rows) - 1, rng.randrange(4)))) if len(rows) > 1 else []
    bounds = [0, *cuts, len(rows)]
    return [pa.RecordBatch.from_pylist(rows[a:b], schema=SCHEMA) for a, b in itertools.pairwise(bounds)]


def _connect(row: dict[str, Any]) -> dict[str, Any]:
    """A folded row in the reference's representation, its cell timestamps aside."""
    out = {name: value for name, value in row.items() if name not in (CELL_TS, ACTION)}
    if out["d"] is not None:
        out["d"] = (out["d"] - EPOCH).days
    if out["m"] is not None:
        out["m"] = [{"key": k, "value": v} for k, v in out["m"]]
    return out


def _reference_cell_ts(row: dict[str, Any]) -> dict[str, int]:
    # the reference keeps the timestamps of cells set to null too; the mirror those of values
    # (an element's entry, `name[label]`, is kept with its collection)
    return {name: ts for name, ts in row[CELL_TS].items()
            if (row[MARKER] if name == ROW_MARKER else row[name.split("[")[0]] is not None)}


RUN = fold_batches([c.name for c in KEYS], [value_rule(c) for c in VALUES], MARKER, TS_US, OFFSET, CELL_TS, RANK,
                   ACTION, CELLS)


def _check_seed(seed: int, seen: Counter[str]) -> None:
    rng = random.Random(seed)
    workload, reference = Workload(random.Random(seed)), ReferenceMirror()
    stored: dict[Key, dict[str, Any]] = {}
    for batch_id in range(6):
        batch = workload.next_batch()
        touched = reference.touched(batch)
        reference.apply(batch)
        batches = _arrow_batches(rng, _events(batch, touched, stored, reference.deletes))
        seen["keys across batches"] += len(batches) > 1
        for out in RUN(iter(batches)):
            for row in out.to_pylist():
                key = (row["pk"], row["ck"])
                seen[row[ACTION]] += 1
                if row[ACTION] == "delete":
                    assert key in stored, f"seed {seed}, batch {batch_id}: {key} deleted but never stored"
                    del stored[key]
                else:
                    stored[key] = {**row, CELL_TS: dict(row[CELL_TS])}
        got = {k: _connect(row) for k, row in stored.items()}
        want = reference.expected()
        differing = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
        assert not differing, f"seed {seed}, batch {batch_id}: (arrow, reference) {differing}"
        cells = {k: (row[CELL_TS], _reference_cell_ts(reference.rows[k])) for k, row in stored.items()}
        assert all(a == b for a, b in cells.values()), f"seed {seed}, batch {batch_id}: cell timestamps {cells}"
        seen["element times"] += sum(1 for row in stored.values() if any("[" in name for name in row[CELL_TS]))
        seen["snapshot positions"] += sum(1 for row in stored.values() if row[RANK] == 1)
        seen["static rows"] += sum(1 for k in stored if k[1] is None)


def test_the_arrow_fold_equals_the_reference_fold_over_many_seeds() -> None:
    seen: Counter[str] = Counter()
    for seed in range(SEEDS):
        _check_seed(seed, seen)
    # every rule had its cases: rows deleted, positions of snapshot rows, static rows, split keys,
    # collections whose elements were written at different times
    assert all(seen[name] > 50 for name in ("upsert", "delete", "snapshot positions", "static rows",
                                            "keys across batches", "element times")), seen


def test_a_row_a_covering_delete_empties_forgets_its_position() -> None:
    """Seed 11's difference, alone: a stored row (v written at 133, position 140 from a cell nulled
    then) that a partition delete at 133 empties, then a change at 134 in the same micro-batch.
    The row and its position are gone, so the change applies, as it would if the delete came a
    micro-batch earlier (the mirror removes the row and its position with it). The Arrow fold once
    kept position 140 and skipped the change, deleting the row."""
    stored = {"pk": 1, "ck": None, "d": None, "l": None, "m": None, "s": None, "u": None, "v": 4,
              MARKER: False, TS_US: 140, RANK: 0, OFFSET: 27, CELL_TS: {"v": 133}}
    change = {"op": "u", "ts": 134, "offset": 49, "after": {"pk": 1, "ck": None, "v": {"value": 7}}}
    delete = {"kind": "partition_delete", "ts": 133, "offset": 54, "key": {"ck": None, "pk": 1},
              "start": None, "start_inclusive": None, "end": None, "end_inclusive": None}
    want = fold(MIRROR.fold_spec(), stored, [change, delete])
    assert want.action == "upsert" and want.row is not None and want.row["v"] == 7
    key = (1, None)
    rows = [{"pk": 1, "ck": None, "x": x} for x in (
        _stored_event(stored), {"ts": 133, "rank": rank(delete), "off": 54, "kind": DELETE}, _data_event(change, key))]
    rows[0][CELLS] = list(stored[CELL_TS].items())
    got = [row for out in RUN(iter([pa.RecordBatch.from_pylist(rows, schema=SCHEMA)])) for row in out.to_pylist()]
    assert [(r[ACTION], r["v"], r[TS_US]) for r in got] == [("upsert", 7, 134)]
