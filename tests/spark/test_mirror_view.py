"""The view read again and again (issue 41): a session that polls `current_state` reuses its last
read's folded rows while neither the changelog nor the table has a new version. Random
micro-batches (tests/unit/spark/mirror_changes.py: cells, elements, inserts, updates, row deletes,
snapshot rows, replays, range and partition deletes) are appended one after another, a compaction
now and then; after every append the view equals the reference fold of everything appended so
far, and so does a second read with nothing appended, which folds nothing."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import functions as F
from structlog.testing import capture_logs

from bridge.spark.core.decode import Group, ValueFormat
from bridge.spark.core.shape import TableShape
from bridge.spark.mirror.view import current_state
from bridge.spark.mirror.writer import MirrorWriter
from tests.spark.test_mirror_background_compaction import _expected, _later, _rows
from tests.unit.spark.mirror_changes import COLUMNS, ENV, ROW, ReferenceMirror, Workload


def _view(spark: Any, root: Path, hows: Counter[str]) -> dict[Any, dict[str, Any]]:
    with capture_logs() as logs:
        rows = _rows(current_state(spark, str(root), "ks", "t"))
    hows.update(e["how"] for e in logs if e["event"] == "mirror view folded")
    return rows


def test_view_polled_between_appends_equals_the_reference(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    writer = MirrorWriter(str(root), "polled", ValueFormat.JSON_SCHEMAS)
    workload, reference, shifted = Workload(random.Random(23)), ReferenceMirror(), set[int]()
    shape, hows = TableShape(COLUMNS, ROW), Counter[str]()
    for batch_id in range(10):
        batch = _later(workload.next_batch(), batch_id, shifted)
        frame = spark.createDataFrame([(o, orjson.dumps(c).decode()) for o, c in batch.changes],
                                      "offset long, text string")
        group = Group("p.ks.t", "envelope", frame.select("offset", F.from_json("text", ENV).alias("env")), ENV, shape)
        writer.append(spark, ("ks", "t"), [group], batch.dropped, batch_id)
        reference.apply(batch)
        if batch_id % 6 == 5:
            writer.compact(spark)
        expected = _expected(reference)
        assert _view(spark, root, hows) == expected, f"the view after batch {batch_id} ({hows})"
        if batch_id % 3 == 0:
            assert _view(spark, root, hows) == expected, f"the view after batch {batch_id} read again"
    assert hows == {"every pending change": 10, "unchanged": 4}, hows
