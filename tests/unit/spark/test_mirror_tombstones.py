"""`fold.tombstones.unseen`: which range / partition deletes of a micro-batch the store writes."""

from __future__ import annotations

from bridge.spark.fold.tombstones import unseen


def test_a_rerun_micro_batch_stores_only_the_deletes_not_stored_yet() -> None:
    """A delete already stored (read back after a restart) or twice in the batch is written once."""
    known = [('{"pk":1}', 10, '{"kind":"partition_delete","offset":4}')]
    rows = [('{"pk":1}', 10, '{"kind":"partition_delete","offset":4}'),
            ('{"pk":1}', 12, '{"kind":"range_delete","offset":7}'),
            ('{"pk":1}', 12, '{"kind":"range_delete","offset":7}'),
            ('{"pk":2}', 12, '{"kind":"range_delete","offset":8}')]
    assert unseen(known, rows) == [rows[1], rows[3]]
    assert unseen(known + rows, rows) == []
    assert unseen([], rows[:1]) == rows[:1]
