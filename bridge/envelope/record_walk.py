"""What both output formats do alike with a change record (`bridge.envelope.translate` for legacy,
`bridge.envelope.advanced_translate` for advanced). Pure.

- which operations give which event, and which give none (range deletes, clustered partition
  deletes: dropped and counted, and written to `dropped.changes.topic` when it is set);
- the one rule that pairs a record's pre-/post-image rows with its delta rows: a row's pre-image
  goes with its first insert/update/delete of the record, its post-image with its last
  insert/update (the state after the whole record), by primary key (`bridge.scylla.pairing`);
- `RecordWalk`, the walk over a record's rows that calls a format's `upsert` / `delete` and does
  the drops itself, and the one error text naming the table, stream, time and row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from bridge.envelope.errors import TranslationError, UnknownColumnError, ValueConversionError
from bridge.envelope.plan import DroppedChangePlan
from bridge.envelope.records import DropReason, KafkaRecord
from bridge.envelope.row_code import KeyBuilder
from bridge.envelope.source_info import SourceInfo
from bridge.scylla.cdc_time import UUID_EPOCH_OFFSET
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.pairing import pair_images
from bridge.scylla.schema import TableSchema

UPSERT_CODES = {Operation.INSERT: "c", Operation.UPDATE: "u"}
ROW_DELETES = frozenset({Operation.ROW_DELETE, Operation.SERVICE_ROW_DELETE})
PARTITION_DELETES = frozenset({Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE})
ROW_EVENTS = frozenset(UPSERT_CODES) | ROW_DELETES | PARTITION_DELETES  # rows an image can belong to
RANGE_STARTS = {Operation.RANGE_DELETE_START_INCLUSIVE: True, Operation.RANGE_DELETE_START_EXCLUSIVE: False}
RANGE_ENDS = {Operation.RANGE_DELETE_END_INCLUSIVE: True, Operation.RANGE_DELETE_END_EXCLUSIVE: False}

ImagesByRow = tuple[dict[int, LogRow], dict[int, LogRow]]  # (pre, post) by id() of their delta row


def write_micros(time: uuid.UUID) -> int:
    """The write time (µs) of a `cdc$time`; `cdc_time.micros_of` without the UUID properties,
    which cost a microsecond per record."""
    value = time.int
    ticks = ((value >> 64) & 0x0FFF) << 48 | ((value >> 80) & 0xFFFF) << 32 | (value >> 96)
    return (ticks - UUID_EPOCH_OFFSET) // 10


def translation_error(record: ChangeRecord, row: LogRow | None, problem: str) -> TranslationError:
    where = f"{record.keyspace}.{record.table} stream {record.stream_id} cdc$time {record.time}"
    if row is not None:
        where += f" batch_seq_no {row.batch_seq_no} (operation {row.operation.name})"
    return TranslationError(f"cannot translate change of {where}: {problem}")


def check_record(record: ChangeRecord, table: TableSchema, log_names: frozenset[str]) -> None:
    """The record is of the plan's table and has no column the plan does not know (a column
    added after the plan was built: never dropped)."""
    if record.keyspace != table.keyspace or record.table != table.name:
        raise TranslationError(
            f"record of {record.keyspace}.{record.table} given to the plan of {table.qualified_name}"
        )
    for row in record.rows:
        if not row.values.keys() <= log_names:
            column = sorted(row.values.keys() - log_names)[0]
            problem = f"column {column!r} is not in the plan's table schema"
            raise UnknownColumnError(translation_error(record, row, problem).args[0], column)


def images_by_row(record: ChangeRecord, key_names: Sequence[str], pre_wanted: bool, post_wanted: bool) -> ImagesByRow:
    """The pairing rule (module docstring); an image not wanted is not paired."""
    if len(record.rows) <= 3:
        one = _one_row_images(record.rows, key_names, pre_wanted, post_wanted)
        if one is not None:
            return one
    return paired_images(record, key_names, pre_wanted, post_wanted)


def paired_images(record: ChangeRecord, key_names: Sequence[str], pre_wanted: bool, post_wanted: bool) -> ImagesByRow:
    """`images_by_row` of any record, by primary key."""
    pre: dict[int, LogRow] = {}
    post: dict[int, LogRow] = {}
    for change in pair_images(record, key_names):
        if pre_wanted and change.pre_image is not None:
            first = next((r for r in change.deltas if r.operation in ROW_EVENTS), None)
            if first is not None:
                pre[id(first)] = change.pre_image
        if post_wanted and change.post_image is not None:
            last = next((r for r in reversed(change.deltas) if r.operation in UPSERT_CODES), None)
            if last is not None:
                post[id(last)] = change.post_image
    return pre, post


def one_row_parts(rows: Sequence[LogRow], key_names: Sequence[str]) -> tuple[LogRow, LogRow | None,
                                                                              LogRow | None] | None:
    """(delta, pre-image, post-image) of the common imaged record, one delta row and at most one
    pre- and one post-image of that same row; None for any other record (the pairing by key
    decides those)."""
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
        if image is not None and any(image.values.get(n) != values.get(n) for n in key_names):
            return None  # not visibly the same row
    return delta, pre, post


def _one_row_images(rows: Sequence[LogRow], key_names: Sequence[str], pre_wanted: bool,
                    post_wanted: bool) -> ImagesByRow | None:
    """`images_by_row` of the common imaged record (`one_row_parts`), without the pairing by key."""
    parts = one_row_parts(rows, key_names)
    if parts is None:
        return None
    delta, pre, post = parts
    op = delta.operation
    before = {id(delta): pre} if pre is not None and pre_wanted and op in ROW_EVENTS else {}
    after = {id(delta): post} if post is not None and post_wanted and op in UPSERT_CODES else {}
    return before, after


class WalkPlan(Protocol):
    """What `RecordWalk` needs of a format's table plan."""

    @property
    def table(self) -> TableSchema: ...
    @property
    def source(self) -> SourceInfo: ...
    @property
    def key_builder(self) -> KeyBuilder: ...
    @property
    def has_clustering(self) -> bool: ...
    @property
    def dropped(self) -> DroppedChangePlan | None: ...


class RecordWalk:
    """One record's rows in order: inserts and updates to `upsert`, row deletes and partition
    deletes of a table without clustering key to `delete`; range deletes (their two bounds) and
    clustered partition deletes counted in `dropped` and, with `dropped.changes.topic`, written
    there. Subclasses hold the format: `upsert`, `delete` and what `walk` returns."""

    def __init__(self, plan: WalkPlan, record: ChangeRecord, now_micros: int) -> None:
        self.walk_plan = plan
        self.record = record
        self.now_micros = now_micros
        self.source = plan.source.block(write_micros(record.time))
        self.out: list[KafkaRecord] = []
        self.dropped: dict[DropReason, int] = {}
        self.pre: dict[int, LogRow] = {}
        self.post: dict[int, LogRow] = {}
        self._range_start: LogRow | None = None

    def upsert(self, row: LogRow, code: str) -> None:
        raise NotImplementedError

    def delete(self, row: LogRow, row_delete: bool) -> None:
        raise NotImplementedError

    def walk(self) -> None:
        """Every row; a row that cannot be translated raises TranslationError naming it."""
        row: LogRow | None = None
        try:
            for row in self.record.rows:
                self._row(row)
            row = None
            if self._range_start is not None:
                row = self._range_start
                raise ValueConversionError("range delete start bound without its end bound")
        except ValueConversionError as error:
            raise translation_error(self.record, row, str(error)) from None

    def _row(self, row: LogRow) -> None:
        op = row.operation
        code = UPSERT_CODES.get(op)
        if code is not None:
            self.upsert(row, code)
        elif op in ROW_DELETES:
            self.delete(row, True)
        elif op in PARTITION_DELETES:
            if self.walk_plan.has_clustering:
                self._drop(row, DropReason.CLUSTERED_PARTITION_DELETE, "partition_delete", None, None)
            else:
                self.delete(row, False)
        elif op in RANGE_STARTS:
            if self._range_start is not None:
                raise ValueConversionError("range delete start bound follows another start bound")
            self._range_start = row
        elif op in RANGE_ENDS:
            if self._range_start is None:
                raise ValueConversionError("range delete end bound without a start bound")
            start, self._range_start = self._range_start, None
            self._drop(row, DropReason.RANGE_DELETE, "range_delete", start, row)

    def _drop(self, row: LogRow, reason: DropReason, kind: str, start: LogRow | None, end: LogRow | None) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        plan = self.walk_plan
        side = plan.dropped
        if side is None:
            return
        key = plan.key_builder({c.name: row.values.get(c.name) for c in plan.table.partition_key})
        value: dict[str, Any] = {
            "source": self.source,
            "kind": kind,
            "start": None if start is None else side.clustering_builder(start.values),
            "start_inclusive": None if start is None else RANGE_STARTS[start.operation],
            "end": None if end is None else side.clustering_builder(end.values),
            "end_inclusive": None if end is None else RANGE_ENDS[end.operation],
            "ts_ms": self.now_micros // 1000,
        }
        self.out.append(KafkaRecord(side.topic, key, side.key_schema, value, side.value_schema))
