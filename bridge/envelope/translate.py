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
source's one pairing rule (`bridge.scylla.pairing.pair_images`).

With `dropped.changes.topic` set, each dropped range delete and clustered partition delete also
gives a record on that topic (`P.DroppedChange`: kind, clustering bounds and inclusiveness).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bridge.envelope.errors import TranslationError, UnknownColumnError, ValueConversionError
from bridge.envelope.plan import TablePlan
from bridge.envelope.records import DropReason, KafkaRecord, Translation
from bridge.scylla.cdc_time import UUID_EPOCH_OFFSET
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.pairing import pair_images


def write_micros(time: uuid.UUID) -> int:
    """The write time (µs) of a `cdc$time`; `cdc_time.micros_of` without the UUID properties,
    which cost a microsecond per record."""
    value = time.int
    ticks = ((value >> 64) & 0x0FFF) << 48 | ((value >> 80) & 0xFFFF) << 32 | (value >> 96)
    return (ticks - UUID_EPOCH_OFFSET) // 10


_OP_CODES = {Operation.INSERT: "c", Operation.UPDATE: "u"}
_ROW_DELETES = frozenset({Operation.ROW_DELETE, Operation.SERVICE_ROW_DELETE})
_PARTITION_DELETES = frozenset({Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE})
_ROW_EVENTS = frozenset(_OP_CODES) | _ROW_DELETES | _PARTITION_DELETES  # rows an image can belong to
_RANGE_STARTS = {Operation.RANGE_DELETE_START_INCLUSIVE: True, Operation.RANGE_DELETE_START_EXCLUSIVE: False}
_RANGE_ENDS = {Operation.RANGE_DELETE_END_INCLUSIVE: True, Operation.RANGE_DELETE_END_EXCLUSIVE: False}


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


def _images_by_row(plan: TablePlan, record: ChangeRecord) -> tuple[dict[int, LogRow], dict[int, LogRow]]:
    """(pre-image, post-image) by the `id` of the delta row that carries it: a row's pre-image
    goes with its first insert/update/delete of the record, its post-image with its last
    insert/update (the state after the whole record)."""
    if len(record.rows) <= 3:
        one = _one_row_images(plan, record.rows)
        if one is not None:
            return one
    return _paired_images(plan, record)


def _paired_images(plan: TablePlan, record: ChangeRecord) -> tuple[dict[int, LogRow], dict[int, LogRow]]:
    """`_images_by_row` of any record, by the pairing rule (`bridge.scylla.pairing`)."""
    pre: dict[int, LogRow] = {}
    post: dict[int, LogRow] = {}
    for change in pair_images(record, plan.key_names):
        if plan.preimages and change.pre_image is not None:
            first = next((r for r in change.deltas if r.operation in _ROW_EVENTS), None)
            if first is not None:
                pre[id(first)] = change.pre_image
        if plan.postimages and change.post_image is not None:
            last = next((r for r in reversed(change.deltas) if r.operation in _OP_CODES), None)
            if last is not None:
                post[id(last)] = change.post_image
    return pre, post


def _one_row_images(plan: TablePlan, rows: tuple[LogRow, ...]) -> tuple[dict[int, LogRow], dict[int, LogRow]] | None:
    """`_images_by_row` of the common imaged record, one delta row and at most one pre- and one
    post-image of that same row, without the pairing by key; None for any other record."""
    delta = pre = post = None
    for row in rows:
        op = row.operation
        if op is Operation.PRE_IMAGE and pre is None:
            pre = row
        elif op is Operation.POST_IMAGE and post is None:
            post = row
        elif delta is None and not op.is_image:
            delta = row
        else:
            return None
    if delta is None:
        return None
    values = delta.values
    for image in (pre, post):
        if image is not None and any(image.values.get(n) != values.get(n) for n in plan.key_names):
            return None  # not visibly the same row: the pairing by canonical key decides
    op = delta.operation
    before = {id(delta): pre} if pre is not None and plan.preimages and op in _ROW_EVENTS else {}
    after = {id(delta): post} if post is not None and plan.postimages and op in _OP_CODES else {}
    return before, after


def _is_static_row(plan: TablePlan, values: Mapping[str, Any]) -> bool:
    """An image of the static row: a clustered table's row with every clustering column null."""
    names = plan.clustering_names
    return bool(names) and all(values.get(name) is None for name in names)


class _RecordTranslator:
    """Translates one record; holds the per-record state (source block, range pairing, counts)."""

    def __init__(self, plan: TablePlan, record: ChangeRecord, now_micros: int) -> None:
        self.plan = plan
        self.record = record
        self.now_micros = now_micros
        self.source = plan.source.block(write_micros(record.time))
        self.out: list[KafkaRecord] = []
        self.dropped: dict[DropReason, int] = {}
        self.range_start: LogRow | None = None
        self.pre: dict[int, LogRow] = {}
        self.post: dict[int, LogRow] = {}
        if (plan.preimages or plan.postimages) and any(r.operation.is_image for r in record.rows):
            self.pre, self.post = _images_by_row(plan, record)

    def run(self) -> Translation:
        row: LogRow | None = None
        try:
            for row in self.record.rows:
                self._row(row)
            row = None
            if self.range_start is not None:
                row = self.range_start
                raise ValueConversionError("range delete start bound without its end bound")
        except ValueConversionError as error:
            raise self.error(row, str(error)) from None
        return Translation(tuple(self.out), self.dropped or _NOTHING_DROPPED)

    def error(self, row: LogRow | None, problem: str) -> TranslationError:
        record = self.record
        where = f"{record.keyspace}.{record.table} stream {record.stream_id} cdc$time {record.time}"
        if row is not None:
            where += f" batch_seq_no {row.batch_seq_no} (operation {row.operation.name})"
        return TranslationError(f"cannot translate change of {where}: {problem}")

    def _row(self, row: LogRow) -> None:
        op = row.operation
        code = _OP_CODES.get(op)
        if code is not None:
            self._upsert(row, code)
        elif op in _ROW_DELETES:
            self._delete(row)
        elif op in _PARTITION_DELETES:
            if self.plan.has_clustering:
                self._drop(row, DropReason.CLUSTERED_PARTITION_DELETE, "partition_delete", None, None)
            else:
                self._delete(row)
        elif op in _RANGE_STARTS:
            if self.range_start is not None:
                raise ValueConversionError("range delete start bound follows another start bound")
            self.range_start = row
        elif op in _RANGE_ENDS:
            if self.range_start is None:
                raise ValueConversionError("range delete end bound without a start bound")
            start, self.range_start = self.range_start, None
            self._drop(row, DropReason.RANGE_DELETE, "range_delete", start, row)

    def _before(self, row: LogRow, key: dict[str, Any]) -> dict[str, Any] | None:
        pre = self.pre.get(id(row))
        if pre is None:
            return None
        return self.plan.pre_image_builder(pre.values, key, _is_static_row(self.plan, pre.values))

    def _upsert(self, row: LogRow, code: str) -> None:
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

    def _delete(self, row: LogRow) -> None:
        plan = self.plan
        key = plan.key_builder(row.values)
        before = self._before(row, key)
        if before is None:
            before = plan.delta_builder(row.values, key)
        value = envelope(self.source, before, None, "d", self.now_micros)
        self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, value, plan.value_schema))
        if plan.tombstones_on_delete:
            self.out.append(KafkaRecord(plan.topic, key, plan.key_schema, None, None))

    def _drop(self, row: LogRow, reason: DropReason, kind: str, start: LogRow | None, end: LogRow | None) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        side = self.plan.dropped
        if side is None:
            return
        plan = self.plan
        key = plan.key_builder({c.name: row.values.get(c.name) for c in plan.table.partition_key})
        value = {
            "source": self.source,
            "kind": kind,
            "start": None if start is None else side.clustering_builder(start.values),
            "start_inclusive": None if start is None else _RANGE_STARTS[start.operation],
            "end": None if end is None else side.clustering_builder(end.values),
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
            problem = f"column {column!r} is not in the plan's table schema"
            raise UnknownColumnError(_RecordTranslator(plan, record, now_micros).error(row, problem).args[0], column)
    if len(rows) == 1 and rows[0].operation in _OP_CODES:
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
        raise _RecordTranslator(plan, record, now_micros).error(row, str(error)) from None
    value = envelope(plan.source.block(write_micros(row.time)), None, after, _OP_CODES[row.operation], now_micros)
    return Translation((KafkaRecord(plan.topic, key, plan.key_schema, value, plan.value_schema),), _NOTHING_DROPPED)
