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
Images are paired with deltas by primary key inside the record (design.md section 3).

With `dropped.changes.topic` set, each dropped range delete and clustered partition delete also
gives a record on that topic (`P.DroppedChange`: kind, clustering bounds and inclusiveness).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bridge.envelope.errors import TranslationError, UnknownColumnError, ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.records import DropReason, KafkaRecord, Translation
from bridge.envelope.rows import CONVERSION_ERRORS, delta_struct, image_struct, key_struct, row_identity, row_key
from bridge.scylla.cdc_time import UUID_EPOCH_OFFSET
from bridge.scylla.model import ChangeRecord, LogRow, Operation


def write_micros(time: uuid.UUID) -> int:
    """The write time (µs) of a `cdc$time`; `cdc_time.micros_of` without the UUID properties,
    which cost a microsecond per record."""
    value = time.int
    ticks = ((value >> 64) & 0x0FFF) << 48 | ((value >> 80) & 0xFFFF) << 32 | (value >> 96)
    return (ticks - UUID_EPOCH_OFFSET) // 10


_OP_CODES = {Operation.INSERT: "c", Operation.UPDATE: "u"}
_ROW_DELETES = frozenset({Operation.ROW_DELETE, Operation.SERVICE_ROW_DELETE})
_PARTITION_DELETES = frozenset({Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE})
_RANGE_STARTS = {Operation.RANGE_DELETE_START_INCLUSIVE: True, Operation.RANGE_DELETE_START_EXCLUSIVE: False}
_RANGE_ENDS = {Operation.RANGE_DELETE_END_INCLUSIVE: True, Operation.RANGE_DELETE_END_EXCLUSIVE: False}


@dataclass(slots=True)
class _Images:
    """Image rows of a record by row identity, and which delta row each one belongs to."""

    pre: dict[tuple[Any, ...], LogRow] = field(default_factory=dict)
    post: dict[tuple[Any, ...], LogRow] = field(default_factory=dict)
    pre_owner: dict[tuple[Any, ...], int] = field(default_factory=dict)
    post_owner: dict[tuple[Any, ...], int] = field(default_factory=dict)


def _index_images(plan: TablePlan, rows: tuple[LogRow, ...]) -> _Images:
    images = _Images()
    for position, row in enumerate(rows):
        op = row.operation
        if op is Operation.PRE_IMAGE and plan.preimages:
            images.pre[row_identity(plan, row.values)] = row
        elif op is Operation.POST_IMAGE and plan.postimages:
            images.post[row_identity(plan, row.values)] = row
        elif op in _OP_CODES or op in _ROW_DELETES or op in _PARTITION_DELETES:
            identity = row_identity(plan, row.values)
            images.pre_owner.setdefault(identity, position)
            if op in _OP_CODES:
                images.post_owner[identity] = position
    return images


class _RecordTranslator:
    """Translates one record; holds the per-record state (source block, range pairing, counts)."""

    def __init__(self, plan: TablePlan, record: ChangeRecord, now_micros: int) -> None:
        self.plan = plan
        self.record = record
        self.now_micros = now_micros
        self.source = plan.source.block(write_micros(record.time))
        self.out: list[KafkaRecord] = []
        self.dropped: Counter[DropReason] = Counter()
        self.range_start: LogRow | None = None
        needs_images = (plan.preimages or plan.postimages) and any(r.operation.is_image for r in record.rows)
        self.images = _index_images(plan, record.rows) if needs_images else None

    def run(self) -> Translation:
        row: LogRow | None = None
        try:
            for position, row in enumerate(self.record.rows):
                self._row(position, row)
            row = None
            if self.range_start is not None:
                row = self.range_start
                raise ValueConversionError("range delete start bound without its end bound")
        except ValueConversionError as error:
            raise self._error(row, str(error)) from None
        return Translation(tuple(self.out), dict(self.dropped))

    def _error(self, row: LogRow | None, problem: str) -> TranslationError:
        record = self.record
        where = f"{record.keyspace}.{record.table} stream {record.stream_id} cdc$time {record.time}"
        if row is not None:
            where += f" batch_seq_no {row.batch_seq_no} (operation {row.operation.name})"
        return TranslationError(f"cannot translate change of {where}: {problem}")

    def _row(self, position: int, row: LogRow) -> None:
        op = row.operation
        code = _OP_CODES.get(op)
        if code is not None:
            self._upsert(position, row, code)
        elif op in _ROW_DELETES:
            self._delete(position, row)
        elif op in _PARTITION_DELETES:
            if self.plan.has_clustering:
                self._drop(row, DropReason.CLUSTERED_PARTITION_DELETE, "partition_delete", None, None)
            else:
                self._delete(position, row)
        elif op in _RANGE_STARTS:
            if self.range_start is not None:
                raise ValueConversionError("range delete start bound follows another start bound")
            self.range_start = row
        elif op in _RANGE_ENDS:
            if self.range_start is None:
                raise ValueConversionError("range delete end bound without a start bound")
            start, self.range_start = self.range_start, None
            self._drop(row, DropReason.RANGE_DELETE, "range_delete", start, row)

    def _image_for(self, position: int, row: LogRow, post: bool) -> LogRow | None:
        if self.images is None:
            return None
        identity = row_identity(self.plan, row.values)
        owners = self.images.post_owner if post else self.images.pre_owner
        if owners.get(identity) != position:
            return None
        return (self.images.post if post else self.images.pre).get(identity)

    def _upsert(self, position: int, row: LogRow, code: str) -> None:
        plan = self.plan
        key = row_key(plan, row.values)
        pre = self._image_for(position, row, post=False)
        post = self._image_for(position, row, post=True)
        before = None if pre is None else image_struct(plan, pre.values, key, full=False)
        after = delta_struct(plan, row.values, key) if post is None else image_struct(plan, post.values, key, full=True)
        self._emit(key, before, after, code)

    def _delete(self, position: int, row: LogRow) -> None:
        plan = self.plan
        key = row_key(plan, row.values)
        pre = self._image_for(position, row, post=False)
        before = delta_struct(plan, row.values, key) if pre is None else image_struct(plan, pre.values, key, full=False)
        self._emit(key, before, None, "d")
        if plan.tombstones_on_delete:
            self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, None, None))

    def _emit(self, key: dict[str, Any], before: dict[str, Any] | None, after: dict[str, Any] | None, op: str) -> None:
        plan = self.plan
        now = self.now_micros
        envelope = {
            "source": self.source,
            "before": before,
            "after": after,
            "op": op,
            "ts_ms": now // 1000,
            "transaction": None,
            "ts_us": now,
            "ts_ns": now * 1000,
        }
        self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, envelope, plan.value_schema))

    def _drop(self, row: LogRow, reason: DropReason, kind: str, start: LogRow | None, end: LogRow | None) -> None:
        self.dropped[reason] += 1
        side = self.plan.dropped
        if side is None:
            return
        plan = self.plan
        key = key_struct(plan.key_slots, {c.name: row.values.get(c.name) for c in plan.table.partition_key})
        value = {
            "source": self.source,
            "kind": kind,
            "start": None if start is None else key_struct(side.clustering, start.values),
            "start_inclusive": None if start is None else _RANGE_STARTS[start.operation],
            "end": None if end is None else key_struct(side.clustering, end.values),
            "end_inclusive": None if end is None else _RANGE_ENDS[end.operation],
            "ts_ms": self.now_micros // 1000,
        }
        self.out.append(KafkaRecord(side.topic, key, plan.key_schema, value, side.value_schema))


def translate(plan: TablePlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The Kafka records of one change record (all rows of one stream and `cdc$time`).

    `now_micros` is the processing time that goes into the envelope's `ts_ms`/`ts_us`/`ts_ns`.
    Raises TranslationError naming the table, stream, `cdc$time`, batch sequence number and
    column of anything that cannot be translated; nothing is dropped silently."""
    if record.keyspace != plan.table.keyspace or record.table != plan.table.name:
        raise TranslationError(
            f"record of {record.keyspace}.{record.table} given to the plan of {plan.table.qualified_name}"
        )
    rows = record.rows
    for row in rows:
        if not row.values.keys() <= plan.log_names:  # a column added after the plan: never dropped
            column = sorted(row.values.keys() - plan.log_names)[0]
            raise UnknownColumnError(
                _RecordTranslator(plan, record, now_micros)._error(row, f"column {column!r} is not in the plan's"
                                                                         " table schema").args[0], column)
    if len(rows) == 1 and rows[0].operation in _OP_CODES:
        return _single_upsert(plan, record, now_micros)  # most records: one insert/update row
    return _RecordTranslator(plan, record, now_micros).run()


_NOTHING_DROPPED: Mapping[DropReason, int] = MappingProxyType({})


def _single_upsert(plan: TablePlan, record: ChangeRecord, now_micros: int) -> Translation:
    row = record.rows[0]
    values = row.values
    try:
        # The generated builders straight away; on a value that does not fit, row_key and
        # delta_struct convert again column by column and name the column.
        key = plan.key_builder(values)
        after = plan.delta_builder(values, key)
    except CONVERSION_ERRORS:
        try:
            key = row_key(plan, values)
            after = delta_struct(plan, values, key)
        except ValueConversionError as error:
            raise _RecordTranslator(plan, record, now_micros)._error(row, str(error)) from None
    envelope = {
        "source": plan.source.block(write_micros(row.time)),
        "before": None,
        "after": after,
        "op": _OP_CODES[row.operation],
        "ts_ms": now_micros // 1000,
        "transaction": None,
        "ts_us": now_micros,
        "ts_ns": now_micros * 1000,
    }
    return Translation((KafkaRecord(plan.topic, key, plan.key_schema, envelope, plan.value_schema),), _NOTHING_DROPPED)
