"""Snapshot rows -> `op=r` envelopes (docs/envelope.md, Snapshot records). Pure: no I/O.

A snapshot row is a whole row as the base table holds it: `before` null, `after` every column
of its kind as a cell (`{"value": v}`, `{"value": null}` for a null column) built by the same
rule as a post-image, collections and UDTs whole, `source.snapshot` the snapshot's kind (`true`
for an initial snapshot, `incremental` for a signalled one) and `source.ts_us` the row's time
(`bridge.scylla.snapshot_scan.row_time_us`). Same topic, key and schemas as the table's changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.envelope.errors import TranslationError, ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.records import KafkaRecord, Translation
from bridge.envelope.translate import envelope
from bridge.scylla.model import SnapshotRow


def translate_snapshot(plan: TablePlan, rows: Sequence[SnapshotRow], kind: str, now_micros: int) -> Translation:
    """The `r` records of `rows`, in order. A row that cannot be translated raises a
    TranslationError naming the table and the row's key."""
    out: list[KafkaRecord] = []
    for row in rows:
        try:
            key = plan.key_builder(row.values)
            after = plan.post_image_builder(row.values, key, row.static)
        except ValueConversionError as error:
            keys = {name: row.values.get(name) for name in plan.key_names}
            raise TranslationError(f"cannot translate snapshot row of {plan.table.qualified_name} "
                                   f"with key {keys}: {error}") from None
        source = plan.source.block(row.ts_us)
        source["snapshot"] = kind
        out.append(KafkaRecord(plan.topic, key, plan.key_schema, envelope(source, None, after, "r", now_micros),
                               plan.value_schema))
    return Translation(tuple(out), {})
