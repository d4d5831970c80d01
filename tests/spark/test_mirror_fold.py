"""The mirror's fold (Python over Arrow, `bridge.spark.fold.arrow_fold`) against the reference fold
(`bridge.spark.fold.reference`) through the whole mirror: the random micro-batches of
tests/unit/spark/mirror_changes.py (a few rows and their static rows; cells set and nulled,
element changes, inserts, updates, row deletes, snapshot rows, replays, range and partition
deletes before or after the writes they cover) through `MirrorWriter.apply` into a Delta table;
after each one the table equals the reference's rows. And a table written before `_cdc_rank`
existed gets it, its rows' positions read as writes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.decode import Group, ValueFormat
from bridge.spark.core.shape import TableShape
from bridge.spark.fold.delta_tables import delta_schema
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.fold.reference import CELL_TS, MARKER, OFFSET, RANK, TS_US
from bridge.spark.mirror.writer import MirrorWriter
from tests.unit.spark.mirror_changes import COLUMNS, ENV, ROW, ReferenceMirror, Workload


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


# Seed 5 of those whose batches tell every rank rule apart (1, 5): the most changes, snapshot rows
# and element changes. tests/unit/spark/test_arrow_fold.py runs the Arrow fold alone over 200 seeds.
@pytest.mark.parametrize("seed", [5])
def test_arrow_fold_equals_the_reference_fold(spark: Any, tmp_path: Path, seed: int) -> None:
    """Six micro-batches of random changes of 8 rows and 2 static rows in 2 partitions: after
    each, the Delta table's rows (values, marker, position) equal the reference fold's."""
    workload = Workload(random.Random(seed))
    reference = ReferenceMirror()
    writer = MirrorWriter(str(tmp_path / "mirror"), f"fold-{seed}", ValueFormat.JSON_SCHEMAS)
    shape = TableShape(COLUMNS, ROW)
    stored_ranks: set[int] = set()
    static_rows = 0
    for batch_id in range(6):
        batch = workload.next_batch()
        frame = spark.createDataFrame([(o, orjson.dumps(c).decode()) for o, c in batch.changes],
                                      "offset long, text string")
        group = Group("p.ks.t", "envelope", frame.select("offset", F.from_json("text", ENV).alias("env")), ENV, shape)
        writer.apply(spark, ("ks", "t"), [group], batch.dropped, batch_id)
        reference.apply(batch)
        table = spark.read.format("delta").load(str(tmp_path / "mirror" / "ks" / "t"))
        got = {(r["pk"], r["ck"]): _connect(r.asDict()) for r in table.collect()}
        want = reference.expected()
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
