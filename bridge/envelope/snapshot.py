"""Snapshot rows -> `op=r` envelopes (docs/envelope.md, Snapshot records). Pure: no I/O.

A snapshot row is a whole row as the base table holds it: `before` null, `after` every column
of its kind as a cell (`{"value": v}`, `{"value": null}` for a null column) built by the same
rule as a post-image, collections and UDTs whole, `source.snapshot` the snapshot's kind (`true`
for an initial snapshot, `incremental` for a signalled one) and `source.ts_us` the row's time
(`bridge.scylla.snapshot_scan.row_time_us`). Same topic, key and schemas as the table's changes.

In the advanced format (`translate_snapshot_advanced`) the same row is `after` in plain values
(the full-image rule, key columns with `payload-after`), whatever `cdc.include.after` says (a
snapshot row is the row itself, no image is involved), with the Kafka key, payload key and
headers of the key placement. The Java connector has no snapshot (its
`ScyllaSnapshotChangeEventSource` does nothing), so this is our own, natural extension.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.envelope import advanced_translate
from bridge.envelope.advanced_plan import AdvancedPlan
from bridge.envelope.errors import TranslationError, ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.records import KafkaRecord, Translation
from bridge.envelope.translate import envelope
from bridge.scylla.model import SnapshotRow


def _row_error(plan: TablePlan | AdvancedPlan, row: SnapshotRow, error: ValueConversionError) -> TranslationError:
    keys = {name: row.values.get(name) for name in plan.key_names}
    return TranslationError(f"cannot translate snapshot row of {plan.table.qualified_name} with key {keys}: {error}")


def translate_snapshot(plan: TablePlan, rows: Sequence[SnapshotRow], kind: str, now_micros: int) -> Translation:
    """The `r` records of `rows`, in order. A row that cannot be translated raises a
    TranslationError naming the table and the row's key."""
    out: list[KafkaRecord] = []
    for row in rows:
        try:
            key = plan.key_builder(row.values)
            after = plan.post_image_builder(row.values, key, row.static)
        except ValueConversionError as error:
            raise _row_error(plan, row, error) from None
        source = plan.source.block(row.ts_us)
        source["snapshot"] = kind
        out.append(KafkaRecord(plan.topic, key, plan.key_schema, envelope(source, None, after, "r", now_micros),
                               plan.value_schema))
    return Translation(tuple(out), {})


def translate_snapshot_advanced(plan: AdvancedPlan, rows: Sequence[SnapshotRow], kind: str,
                                now_micros: int) -> Translation:
    """The `r` records of `rows` in the advanced format (module docstring), in order."""
    out: list[KafkaRecord] = []
    split = bool(plan.static_names)  # only then do a row's columns belong to two row kinds
    for row in rows:
        values = row.values
        try:
            key = plan.key_builder(values)
            if split:
                own = plan.static_names if row.static else plan.regular_names
                values = {name: value for name, value in values.items() if name in own}
            after = plan.after.full(values, key)
        except ValueConversionError as error:
            raise _row_error(plan, row, error) from None
        source = plan.source.block(row.ts_us)
        source["snapshot"] = kind
        value = advanced_translate.envelope(plan, source, None, after, key, "r", now_micros)
        out.append(advanced_translate.event_record(plan, key, value))
    return Translation(tuple(out), {})
