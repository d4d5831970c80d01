"""What the source layer hands on: log rows grouped into change records.

A record is every log row sharing one (`cdc$stream_id`, `cdc$time`); it is read, translated
and committed whole (design.md section 3).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from bridge.scylla.cdc_time import micros_of
from bridge.scylla.stream_id import StreamId


class Operation(IntEnum):
    """`cdc$operation` values (cdc-log-format.md section 2)."""

    PRE_IMAGE = 0
    UPDATE = 1
    INSERT = 2
    ROW_DELETE = 3
    PARTITION_DELETE = 4
    RANGE_DELETE_START_INCLUSIVE = 5
    RANGE_DELETE_START_EXCLUSIVE = 6
    RANGE_DELETE_END_INCLUSIVE = 7
    RANGE_DELETE_END_EXCLUSIVE = 8
    POST_IMAGE = 9
    SERVICE_ROW_DELETE = -3
    SERVICE_PARTITION_DELETE = -4

    @property
    def is_image(self) -> bool:
        return self in (Operation.PRE_IMAGE, Operation.POST_IMAGE)

    @property
    def is_range_bound(self) -> bool:
        return 5 <= self.value <= 8


# LogRow and ChangeRecord are made for every log row and record read: not frozen, because a
# frozen dataclass costs ~0.1 us more per field to create (~1 us per row here). Treat them as
# immutable; neither is hashable either way (they hold a dict).
@dataclass(slots=True)
class LogRow:
    """One row of a CDC log table. `values` holds every non-`cdc$` key column and every base
    column's value, `cdc$deleted_*` and `cdc$deleted_elements_*` column, as the driver returns
    them (None for null)."""

    stream_id: StreamId
    time: uuid.UUID
    batch_seq_no: int
    operation: Operation
    ttl: int | None
    end_of_batch: bool
    values: Mapping[str, Any]


@dataclass(slots=True)
class ChangeRecord:
    """All log rows of one (stream, `cdc$time`) in `cdc$batch_seq_no` order."""

    keyspace: str
    table: str
    rows: tuple[LogRow, ...]

    @property
    def stream_id(self) -> StreamId:
        return self.rows[0].stream_id

    @property
    def time(self) -> uuid.UUID:
        return self.rows[0].time

    @property
    def micros(self) -> int:
        return micros_of(self.rows[0].time)

    @property
    def last_seq(self) -> int:
        return self.rows[-1].batch_seq_no


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One row of the base table as the snapshot hands it on: `values` in the CDC log's
    representation (what a post-image row holds), `static` for a partition's static row (its
    clustering columns null), `ts_us` the time its `r` carries."""

    values: Mapping[str, Any]
    static: bool
    ts_us: int
