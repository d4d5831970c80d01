"""Compaction beside appends (issue 41): the streaming mirror compacts in a thread while the next
micro-batches append to the same changelog. Random micro-batches (tests/unit/spark/mirror_changes.py:
cells, elements, inserts, updates, row deletes, snapshot rows, replays of earlier changes, range and
partition deletes) are appended one after another while background compactions fold what each
changelog version held; at the end the view, and after the last compaction (`cdc-bridge spark
compact`, in its own process) the table, equal the reference fold: nothing appended meanwhile was
lost or folded twice.

Each micro-batch's writes are later than the previous one's (as a CDC stream's are, the replays
apart): with writes older than a row delete folded in an earlier compaction the mirror's rows depend
on where compactions fall (a row delete is not remembered once folded; docs/spark.md), which is not
what this test is about."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import functions as F

from bridge.spark.core.decode import Group, ValueFormat
from bridge.spark.core.shape import TableShape
from bridge.spark.fold.delta_tables import TABLE_PROPERTIES, log_versions
from bridge.spark.mirror.changelog import CHANGELOG_PROPERTIES, CHECKPOINT_EVERY, CHECKPOINT_INTERVAL
from bridge.spark.mirror.view import current_state
from bridge.spark.mirror.writer import MirrorWriter
from tests.spark.jobs import CLI
from tests.spark.test_mirror_fold import _connect
from tests.unit.spark.mirror_changes import COLUMNS, ENV, ROW, MicroBatch, ReferenceMirror, Workload


def _rows(frame: Any) -> dict[Any, dict[str, Any]]:
    return {(r["pk"], r["ck"]): {k: v for k, v in _connect(r.asDict()).items() if not k.startswith("_cdc")}
            for r in frame.collect()}


def _expected(reference: ReferenceMirror) -> dict[Any, dict[str, Any]]:
    return {k: {c: v for c, v in row.items() if not c.startswith("_cdc")} for k, row in reference.expected().items()}


def _statistics_columns(table: Path) -> set[str]:
    """The columns with statistics in any data file the table's commits added."""
    found: set[str] = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            stats = orjson.loads(line).get("add", {}).get("stats")
            if stats:
                parsed = orjson.loads(stats)
                found |= set(parsed.get("minValues", {})) | set(parsed.get("nullCount", {}))
    return found


def _later(batch: MicroBatch, batch_id: int, shifted: set[int]) -> MicroBatch:
    """The batch with its new writes' timestamps moved past every earlier batch's (replays keep theirs)."""
    for _, change in batch.changes:
        if id(change) not in shifted:
            shifted.add(id(change))
            change["source"]["ts_us"] += 1000 * batch_id
    for delete in batch.dropped:
        delete["ts"] += 1000 * batch_id
    return batch


def test_compactions_beside_appends_lose_and_repeat_nothing(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    writer = MirrorWriter(str(root), "beside", ValueFormat.JSON_SCHEMAS, spark=spark)
    assert writer.background is not None
    workload, reference, shifted = Workload(random.Random(11)), ReferenceMirror(), set[int]()
    shape = TableShape(COLUMNS, ROW)
    appended_during_compaction = compactions = 0
    for batch_id in range(12):
        batch = _later(workload.next_batch(), batch_id, shifted)
        frame = spark.createDataFrame([(o, orjson.dumps(c).decode()) for o, c in batch.changes],
                                      "offset long, text string")
        group = Group("p.ks.t", "envelope", frame.select("offset", F.from_json("text", ENV).alias("env")), ENV, shape)
        running_before = writer.background.running
        writer.append(spark, ("ks", "t"), [group], batch.dropped, batch_id)
        reference.apply(batch)
        if running_before and writer.background.running:
            appended_during_compaction += 1
        if batch_id >= 1 and writer.background.start():  # whenever none is running
            compactions += 1
    writer.background.wait()
    assert compactions >= 1 and appended_during_compaction >= 2, (compactions, appended_during_compaction)
    expected = _expected(reference)
    assert _rows(current_state(spark, str(root), "ks", "t")) == expected, "the view"
    # The appends write no checkpoint of the changelog (Delta's interval set to 100, more commits
    # than this test makes); the compactions write them. It collects no column statistics. The
    # table has the mirror's properties.
    changelog = root / "_cdc_changes" / "ks" / "t"
    properties = spark.sql(f"DESCRIBE DETAIL delta.`{changelog}`").collect()[0]["properties"]
    assert CHANGELOG_PROPERTIES.items() <= properties.items(), properties
    assert not _statistics_columns(changelog), "the changelog's files carry no column statistics"
    table = spark.sql(f"DESCRIBE DETAIL delta.`{root / 'ks' / 't'}`").collect()[0]["properties"]
    assert TABLE_PROPERTIES.items() <= table.items(), table  # deletion vectors for the compaction's MERGE
    latest, checkpointed = log_versions(spark, str(changelog))
    assert latest is not None and CHECKPOINT_EVERY <= latest < CHECKPOINT_INTERVAL and checkpointed is not None, \
        (latest, checkpointed)
    # the last compaction by the maintenance command, in its own JVM, as a CronJob would run it
    done = subprocess.run([*CLI, "compact", "--delta", str(root), "--master", "local[1]"], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0 and "compaction done" in done.stdout + done.stderr, done.stdout + done.stderr
    assert _rows(spark.read.format("delta").load(str(root / "ks" / "t"))) == expected, "the table"
    assert spark.read.format("delta").load(str(root / "_cdc_changes" / "ks" / "t")).count() == 0
