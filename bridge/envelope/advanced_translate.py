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
from bridge.envelope.errors import ValueConversionError
from bridge.envelope.record_walk import (
    UPSERT_CODES,
    RecordWalk,
    check_record,
    images_by_row,
    one_row_parts,
    translation_error,
    write_micros,
)
from bridge.envelope.records import KafkaRecord, Translation
from bridge.envelope.settings import IncludeMode
from bridge.scylla.model import ChangeRecord, LogRow

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


def event_record(plan: AdvancedPlan, key: dict[str, Any], value: dict[str, Any] | None,
                 headers: tuple[tuple[str, bytes], ...] | None = None) -> KafkaRecord:
    """A record of the table's topic: the Kafka key with `kafka-key` (else null), the key's
    headers with `kafka-headers` (`headers` when the caller has them already); `value` None is
    a tombstone."""
    if headers is None:
        headers = _NO_HEADERS if plan.headers is None else plan.headers(key)
    kafka_key = None if plan.key_schema is None else key
    value_schema = None if value is None else plan.value_schema
    return KafkaRecord(plan.topic, kafka_key, plan.key_schema, value, value_schema, headers)


class _RecordTranslator(RecordWalk):
    """Translates one record in the advanced format (the walk and the drops: `RecordWalk`)."""

    def __init__(self, plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> None:
        super().__init__(plan, record, now_micros)
        self.plan = plan
        self.missing: dict[str, int] = {}
        if any(r.operation.is_image for r in record.rows):  # a mode `none` ignores its image
            self.pre, self.post = images_by_row(record, plan.key_names, plan.before_mode is not _NONE,
                                                plan.after_mode is not _NONE)

    def run(self) -> Translation:
        self.walk()
        return Translation(tuple(self.out), self.dropped or _NOTHING, self.missing or _NOTHING)

    def _emit(self, key: dict[str, Any], before: Any, after: Any, code: str) -> tuple[tuple[str, bytes], ...]:
        record = event_record(self.plan, key, envelope(self.plan, self.source, before, after, key, code,
                                                       self.now_micros))
        self.out.append(record)
        return record.headers

    def upsert(self, row: LogRow, code: str) -> None:
        key, before, after = _upsert_parts(self.plan, row, code, self.pre.get(id(row)), self.post.get(id(row)),
                                           self.missing)
        self._emit(key, before, after, code)

    def delete(self, row: LogRow, row_delete: bool) -> None:
        plan = self.plan
        key = plan.key_builder(row.values)
        pre = self.pre.get(id(row))
        before = None
        if pre is not None:
            before = plan.before.full(pre.values, key)
        elif row_delete and plan.before_mode is not _NONE:
            self.missing["before"] = self.missing.get("before", 0) + 1
        headers = self._emit(key, before, None, "d")
        if plan.tombstones_on_delete:
            # Debezium's EventDispatcher: the delete's key (null too) and headers, value null
            self.out.append(event_record(plan, key, None, headers))


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


_MISSING_AFTER: Mapping[str, int] = MappingProxyType({"after": 1})
_MISSING_BEFORE: Mapping[str, int] = MappingProxyType({"before": 1})
_MISSING_BOTH: Mapping[str, int] = MappingProxyType({"before": 1, "after": 1})


def _single_upsert(plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> Translation:
    """The common record, one insert/update row and no image, without the per-record state."""
    row = record.rows[0]
    code = UPSERT_CODES[row.operation]
    try:
        key = plan.key_builder(row.values)
    except ValueConversionError as error:
        raise translation_error(record, row, str(error)) from None
    out = (event_record(plan, key, envelope(plan, plan.source.block(write_micros(row.time)), None, None, key, code,
                                            now_micros)),)
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
    check_record(record, plan.table, plan.log_names)
    rows = record.rows
    if len(rows) == 1 and rows[0].operation in UPSERT_CODES:
        return _single_upsert(plan, record, now_micros)
    if len(rows) <= 3:
        one = _one_upsert(plan, record, now_micros)
        if one is not None:
            return one
    return _RecordTranslator(plan, record, now_micros).run()


def _one_upsert(plan: AdvancedPlan, record: ChangeRecord, now_micros: int) -> Translation | None:
    """The common record with images, one insert/update and its images, without the per-record
    state; None for a record of another shape."""
    parts = one_row_parts(record.rows, plan.key_names)
    if parts is None or parts[0].operation not in UPSERT_CODES:
        return None
    change, pre, post = parts
    code = UPSERT_CODES[change.operation]
    if plan.before_mode is _NONE:
        pre = None
    if plan.after_mode is _NONE:
        post = None
    missing: dict[str, int] = {}
    try:
        key, before, after = _upsert_parts(plan, change, code, pre, post, missing)
    except ValueConversionError as error:
        raise translation_error(record, change, str(error)) from None
    value = envelope(plan, plan.source.block(write_micros(change.time)), before, after, key, code, now_micros)
    out = (event_record(plan, key, value),)
    return Translation(out, _NOTHING, missing or _NOTHING)
