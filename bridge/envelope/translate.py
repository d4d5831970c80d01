"""Change record -> Kafka records (design.md section 2.2). Pure: no I/O, no clock of its own.

One envelope per delta row, in `cdc$batch_seq_no` order, as the Java connector emits them:

| `cdc$operation`                        | event |
|----------------------------------------|-------|
| 2 insert                               | `op=c`, `after` from the delta row |
| 1 update (also static rows, ck null)   | `op=u`, `after` from the delta row |
| 3 row delete, -3 (per-row TTL expiry)  | `op=d`, `after=null`, `before` = key + delta cells; then a tombstone |
| 4 / -4 partition delete, no clustering key | as a row delete |
| 4 / -4 partition delete, clustering key | no event; counted (`partition_delete_clustered`) |
| 5..8 range delete bounds               | no event; counted once per range (`range_delete`) |
| 0 pre-image, 9 post-image              | no event of their own (see below) |

With `experimental.preimages.enabled`, the pre-image row of a row becomes `before` of the first
delta row of that row in the record; with `experimental.postimages.enabled`, the post-image row
becomes `after` of the last insert/update of that row in the record (every column then a cell).
Images are paired with deltas by primary key inside the record (design.md section 3), by the
source's one pairing rule (`bridge.envelope.record_walk`, `bridge.scylla.pairing`).

With `dropped.changes.topic` set, each dropped range delete and clustered partition delete also
gives a record on that topic (`P.DroppedChange`: kind, clustering bounds and inclusiveness).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bridge.envelope.errors import ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.record_walk import (
    UPSERT_CODES,
    RecordWalk,
    check_record,
    images_by_row,
    translation_error,
    write_micros,
)
from bridge.envelope.records import DropReason, KafkaRecord, Translation
from bridge.scylla.model import ChangeRecord, LogRow


def envelope(source: dict[str, Any], before: Any, after: Any, op: str, now_micros: int) -> dict[str, Any]:
    """The envelope value (field order = the Envelope schema's); `now_micros` is processing time."""
    return {
        "source": source,
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": now_micros // 1000,
        "transaction": None,
        "ts_us": now_micros,
        "ts_ns": now_micros * 1000,
    }


def _is_static_row(plan: TablePlan, values: Mapping[str, Any]) -> bool:
    """An image of the static row: a clustered table's row with every clustering column null."""
    names = plan.clustering_names
    return bool(names) and all(values.get(name) is None for name in names)


class _RecordTranslator(RecordWalk):
    """Translates one record in the legacy format (the walk and the drops: `RecordWalk`)."""

    def __init__(self, plan: TablePlan, record: ChangeRecord, now_micros: int) -> None:
        super().__init__(plan, record, now_micros)
        self.plan = plan
        if (plan.preimages or plan.postimages) and any(r.operation.is_image for r in record.rows):
            self.pre, self.post = images_by_row(record, plan.key_names, plan.preimages, plan.postimages)

    def run(self) -> Translation:
        self.walk()
        return Translation(tuple(self.out), self.dropped or _NOTHING_DROPPED)

    def _before(self, row: LogRow, key: dict[str, Any]) -> dict[str, Any] | None:
        pre = self.pre.get(id(row))
        if pre is None:
            return None
        return self.plan.pre_image_builder(pre.values, key, _is_static_row(self.plan, pre.values))

    def upsert(self, row: LogRow, code: str) -> None:
        plan = self.plan
        key = plan.key_builder(row.values)
        post = self.post.get(id(row))
        if post is None:
            after = plan.delta_builder(row.values, key)
        else:
            after = plan.post_image_builder(post.values, key, _is_static_row(plan, post.values))
        self.out.append(KafkaRecord(plan.topic, key, plan.key_schema,
                                    envelope(self.source, self._before(row, key), after, code, self.now_micros),
                                    plan.value_schema))

    def delete(self, row: LogRow, row_delete: bool) -> None:
        plan = self.plan
        key = plan.key_builder(row.values)
        before = self._before(row, key)
        if before is None:
            before = plan.delta_builder(row.values, key)
        value = envelope(self.source, before, None, "d", self.now_micros)
        self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, value, plan.value_schema))
        if plan.tombstones_on_delete:
            self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, None, None))


def translate(plan: TablePlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The Kafka records of one change record (all rows of one stream and `cdc$time`).

    `now_micros` is the processing time that goes into the envelope's `ts_ms`/`ts_us`/`ts_ns`.
    Raises TranslationError naming the table, stream, `cdc$time`, batch sequence number and
    column of anything that cannot be translated; nothing is dropped silently."""
    check_record(record, plan.table, plan.log_names)
    rows = record.rows
    if len(rows) == 1 and rows[0].operation in UPSERT_CODES:
        return _single_upsert(plan, record, now_micros)  # most records: one insert/update row
    return _RecordTranslator(plan, record, now_micros).run()


_NOTHING_DROPPED: Mapping[DropReason, int] = MappingProxyType({})


def _single_upsert(plan: TablePlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The common record, one insert/update row and no images, without the per-record state."""
    row = record.rows[0]
    values = row.values
    try:
        key = plan.key_builder(values)
        after = plan.delta_builder(values, key)
    except ValueConversionError as error:
        raise translation_error(record, row, str(error)) from None
    value = envelope(plan.source.block(write_micros(row.time)), None, after, UPSERT_CODES[row.operation], now_micros)
    return Translation((KafkaRecord(plan.topic, key, plan.key_schema, value, plan.value_schema),), _NOTHING_DROPPED)
