"""Change record -> Kafka records in the advanced format (`bridge.envelope.advanced_plan`). Pure.

One event per delta row, in `cdc$batch_seq_no` order, as `ScyllaChangesConsumer` and
`ScyllaChangeRecordEmitter` (scylla-cdc-source-connector 74d336e) emit them; the operations, the
dropped changes and their counts are the legacy format's (`bridge.envelope.translate`):
insert `c`, update `u`, row delete and partition delete of a table without clustering key `d`
(then a tombstone, with the same key and headers, unless `tombstones.on.delete=false`);
clustered partition deletes and range deletes give no event and are counted.

`before` / `after` come only from the record's pre-/post-image rows, never from the delta, per
`cdc.include.before` / `cdc.include.after` (an image whose mode is `none` is not used at all,
not even for the key):

- insert `c`: `after` the whole post-image; `before` the whole pre-image (an insert over an
  existing row has one), else null;
- update `u`: `after` the whole post-image, or with `only-updated` its modified columns only;
  `before` with `only-updated` the pre-image's modified columns only, else with both images the
  modified columns from the pre-image and the others from the post-image, with the pre-image
  alone the pre-image as it is;
- delete `d`: `after` null; `before` the whole pre-image.

Images are paired with delta rows by primary key inside the record (`bridge.scylla.pairing`):
a row's pre-image goes with its first event of the record, its post-image with its last insert
or update. A record is whole (all rows of one stream and `cdc$time`, `bridge.scylla.records`),
so an image that is not in it never comes: the connector would wait for it and drop the change
after `cdc.incomplete.task.timeout.ms`; here the event goes out with that image null and the
lack is counted in `Translation.missing_images` ("before" / "after"). An image is needed for:
`after` of an insert or update, `before` of an update or row delete, when its mode is not
`none`. A partition delete's pre-image is used when present but never missing (Scylla writes
none before 2026.1, and the connector only waits for it from that version on).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from bridge.envelope.advanced_plan import AdvancedPlan
from bridge.envelope.errors import TranslationError, UnknownColumnError, ValueConversionError
from bridge.envelope.records import DropReason, KafkaRecord, Translation
from bridge.envelope.settings import IncludeMode
from bridge.envelope.translate import write_micros
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.pairing import pair_images

_UPSERTS = {Operation.INSERT: "c", Operation.UPDATE: "u"}
_ROW_DELETES = frozenset({Operation.ROW_DELETE, Operation.SERVICE_ROW_DELETE})
_PARTITION_DELETES = frozenset({Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE})
_ROW_EVENTS = frozenset(_UPSERTS) | _ROW_DELETES | _PARTITION_DELETES
_RANGE_STARTS = {Operation.RANGE_DELETE_START_INCLUSIVE: True, Operation.RANGE_DELETE_START_EXCLUSIVE: False}
_RANGE_ENDS = {Operation.RANGE_DELETE_END_INCLUSIVE: True, Operation.RANGE_DELETE_END_EXCLUSIVE: False}
_NONE = IncludeMode.NONE
_ONLY_UPDATED = IncludeMode.ONLY_UPDATED
_NOTHING: Mapping[Any, int] = MappingProxyType({})
_NO_HEADERS: tuple[tuple[str, bytes], ...] = ()


def envelope(plan: AdvancedPlan, source: dict[str, Any], before: Any, after: Any, key: dict[str, Any], op: str,
             now_micros: int) -> dict[str, Any]:
    """The envelope value in the schema's field order; `ts_us` / `ts_ns` stay null, as the
    connector's `generalizedEnvelope` leaves them."""
    name = plan.payload_key_name
    if name is None:
        return {"source": source, "before": before, "after": after, "op": op, "ts_ms": now_micros // 1000,
                "transaction": None, "ts_us": None, "ts_ns": None}
    return {"source": source, "before": before, "after": after, name: key, "op": op, "ts_ms": now_micros // 1000,
            "transaction": None, "ts_us": None, "ts_ns": None}


class _RecordTranslator:
    """Translates one record; holds the per-record state (source block, images, counts)."""

    def __init__(self, plan: AdvancedPlan, record: ChangeRecord, now_micros: int, pair: bool = True) -> None:
        self.plan = plan
        self.record = record
        self.now_micros = now_micros
        self.source = plan.source.block(write_micros(record.time))
        self.out: list[KafkaRecord] = []
        self.dropped: dict[DropReason, int] = {}
        self.missing: dict[str, int] = {}
        self.range_start: LogRow | None = None
        self.pre: dict[int, LogRow] = {}
        self.post: dict[int, LogRow] = {}
        if pair and any(r.operation.is_image for r in record.rows):
            self._pair()

    def _pair(self) -> None:
        """A row's pre-image goes with its first event of the record, its post-image with its
        last insert/update (the state after the whole record); a mode `none` ignores its image."""
        plan = self.plan
        for change in pair_images(self.record, plan.key_names):
            if plan.before_mode is not _NONE and change.pre_image is not None:
                first = next((r for r in change.deltas if r.operation in _ROW_EVENTS), None)
                if first is not None:
                    self.pre[id(first)] = change.pre_image
            if plan.after_mode is not _NONE and change.post_image is not None:
                last = next((r for r in reversed(change.deltas) if r.operation in _UPSERTS), None)
                if last is not None:
                    self.post[id(last)] = change.post_image

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
            raise _error(self.record, row, str(error)) from None
        return Translation(tuple(self.out), self.dropped or _NOTHING, self.missing or _NOTHING)

    def _missing(self, image: str) -> None:
        self.missing[image] = self.missing.get(image, 0) + 1

    def _row(self, row: LogRow) -> None:
        op = row.operation
        code = _UPSERTS.get(op)
        if code is not None:
            self._upsert(row, code)
        elif op in _ROW_DELETES:
            self._delete(row, True)
        elif op in _PARTITION_DELETES:
            if self.plan.has_clustering:
                self._drop(row, DropReason.CLUSTERED_PARTITION_DELETE, "partition_delete", None, None)
            else:
                self._delete(row, False)
        elif op in _RANGE_STARTS:
            if self.range_start is not None:
                raise ValueConversionError("range delete start bound follows another start bound")
            self.range_start = row
        elif op in _RANGE_ENDS:
            if self.range_start is None:
                raise ValueConversionError("range delete end bound without a start bound")
            start, self.range_start = self.range_start, None
            self._drop(row, DropReason.RANGE_DELETE, "range_delete", start, row)

    def _emit(self, key: dict[str, Any], before: Any, after: Any, code: str) -> tuple[tuple[str, bytes], ...]:
        plan = self.plan
        headers = _NO_HEADERS if plan.headers is None else plan.headers(key)
        value = envelope(plan, self.source, before, after, key, code, self.now_micros)
        kafka_key = None if plan.key_schema is None else key
        self.out.append(KafkaRecord(plan.topic, kafka_key, plan.key_schema, value, plan.value_schema, headers))
        return headers

    def _upsert(self, row: LogRow, code: str) -> None:
        key, before, after = _upsert_parts(self.plan, row, code, self.pre.get(id(row)), self.post.get(id(row)),
                                           self.missing)
        self._emit(key, before, after, code)

    def _delete(self, row: LogRow, row_delete: bool) -> None:
        plan = self.plan
        key = plan.key_builder(row.values)
        pre = self.pre.get(id(row))
        before = None
        if pre is not None:
            before = plan.before.full(pre.values, key)
        elif row_delete and plan.before_mode is not _NONE:
            self._missing("before")
        headers = self._emit(key, before, None, "d")
        if plan.tombstones_on_delete:
            # Debezium's EventDispatcher: the delete's key (null too) and headers, value null
            kafka_key = None if plan.key_schema is None else key
            self.out.append(KafkaRecord(plan.topic, kafka_key, plan.key_schema, None, None, headers))

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
        self.out.append(KafkaRecord(side.topic, key, side.key_schema, value, side.value_schema))


def _upsert_parts(plan: AdvancedPlan, row: LogRow, code: str, pre: LogRow | None, post: LogRow | None,
                  missing: dict[str, int]) -> tuple[dict[str, Any], Any, Any]:
    """(key, before, after) of an insert/update with its paired images; a lacking image the
    modes need is counted in `missing`."""
    key = plan.key_builder(row.values)
    before = after = None
    if code == "c":
        if post is not None:
            after = plan.after.full(post.values, key)
        if pre is not None:
            before = plan.before.full(pre.values, key)
    else:
        if pre is None and plan.before_mode is not _NONE:
            missing["before"] = missing.get("before", 0) + 1
        merged = pre is not None and post is not None and plan.before_mode is not _ONLY_UPDATED
        needs_modified = merged or (post is not None and plan.after_mode is _ONLY_UPDATED) or (
            pre is not None and plan.before_mode is _ONLY_UPDATED)
        modified = plan.modified(row.values) if needs_modified else frozenset()
        if post is not None:
            if plan.after_mode is _ONLY_UPDATED:
                after = plan.after.only_updated(post.values, key, modified)
            else:
                after = plan.after.full(post.values, key)
        if pre is not None:
            if plan.before_mode is _ONLY_UPDATED:
                before = plan.before.only_updated(pre.values, key, modified)
            elif post is None:
                before = plan.before.full(pre.values, key)
            else:
                before = plan.before.merged(pre.values, post.values, key, modified)
    if post is None and plan.after_mode is not _NONE:
        missing["after"] = missing.get("after", 0) + 1
    return key, before, after


def _error(record: ChangeRecord, row: LogRow | None, problem: str) -> TranslationError:
    where = f"{record.keyspace}.{record.table} stream {record.stream_id} cdc$time {record.time}"
    if row is not None:
        where += f" batch_seq_no {row.batch_seq_no} (operation {row.operation.name})"
    return TranslationError(f"cannot translate change of {where}: {problem}")


_MISSING_AFTER: Mapping[str, int] = MappingProxyType({"after": 1})
_MISSING_BEFORE: Mapping[str, int] = MappingProxyType({"before": 1})
_MISSING_BOTH: Mapping[str, int] = MappingProxyType({"before": 1, "after": 1})


def _single_upsert(plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The common record, one insert/update row and no image, without the per-record state."""
    row = record.rows[0]
    code = _UPSERTS[row.operation]
    try:
        key = plan.key_builder(row.values)
    except ValueConversionError as error:
        raise _error(record, row, str(error)) from None
    value = envelope(plan, plan.source.block(write_micros(row.time)), None, None, key, code, now_micros)
    headers = _NO_HEADERS if plan.headers is None else plan.headers(key)
    kafka_key = None if plan.key_schema is None else key
    out = (KafkaRecord(plan.topic, kafka_key, plan.key_schema, value, plan.value_schema, headers),)
    missing = _NOTHING
    if plan.after_mode is not _NONE:
        missing = _MISSING_BOTH if code == "u" and plan.before_mode is not _NONE else _MISSING_AFTER
    elif code == "u" and plan.before_mode is not _NONE:
        missing = _MISSING_BEFORE
    return Translation(out, _NOTHING, missing)


def translate_advanced(plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The Kafka records of one change record in the advanced format; `now_micros` is the
    processing time of the envelope's `ts_ms`. Raises TranslationError naming the table,
    stream, `cdc$time`, batch sequence number and column of anything that cannot be translated."""
    if record.keyspace != plan.table.keyspace or record.table != plan.table.name:
        raise TranslationError(
            f"record of {record.keyspace}.{record.table} given to the plan of {plan.table.qualified_name}"
        )
    rows = record.rows
    for row in rows:
        if not row.values.keys() <= plan.log_names:  # a column added after the plan: never dropped
            column = sorted(row.values.keys() - plan.log_names)[0]
            problem = f"column {column!r} is not in the plan's table schema"
            raise UnknownColumnError(_error(record, row, problem).args[0], column)
    if len(rows) == 1 and rows[0].operation in _UPSERTS:
        return _single_upsert(plan, record, now_micros)
    if len(rows) <= 3:
        one = _one_change(plan, record, now_micros)
        if one is not None:
            return one
    return _RecordTranslator(plan, record, now_micros).run()


def _one_change(plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> Translation | None:
    """The common record with images, one change of one row and at most one pre- and one
    post-image of that same row, translated with the images already paired (what
    `_RecordTranslator._pair` would find, without its per-record mapping by key); None when the
    record is of another shape."""
    change = pre = post = None
    for row in record.rows:
        op = row.operation
        if op is Operation.PRE_IMAGE and pre is None:
            pre = row
        elif op is Operation.POST_IMAGE and post is None:
            post = row
        elif change is None and op in _ROW_EVENTS:
            change = row
        else:
            return None
    if change is None:
        return None
    values = change.values
    for image in (pre, post):
        if image is not None and any(image.values.get(n) != values.get(n) for n in plan.key_names):
            return None
    if plan.before_mode is _NONE:
        pre = None
    if plan.after_mode is _NONE:
        post = None
    code = _UPSERTS.get(change.operation)
    if code is None:  # a delete: the general path (deletes are the rarer records)
        translator = _RecordTranslator(plan, record, now_micros, pair=False)
        if pre is not None:
            translator.pre[id(change)] = pre
        return translator.run()
    missing: dict[str, int] = {}
    try:
        key, before, after = _upsert_parts(plan, change, code, pre, post, missing)
    except ValueConversionError as error:
        raise _error(record, change, str(error)) from None
    value = envelope(plan, plan.source.block(write_micros(change.time)), before, after, key, code, now_micros)
    headers = _NO_HEADERS if plan.headers is None else plan.headers(key)
    kafka_key = None if plan.key_schema is None else key
    out = (KafkaRecord(plan.topic, kafka_key, plan.key_schema, value, plan.value_schema, headers),)
    return Translation(out, _NOTHING, missing or _NOTHING)
