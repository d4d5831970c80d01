"""What the translator hands to the producer: Kafka records with Connect-style keys and values,
plus counts of the changes that give no event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from bridge.envelope.connect_schema import ConnectSchema


# Not frozen: a frozen dataclass costs ~1 µs more to create, a tenth of the per-record budget.
# Treat both as immutable.
@dataclass(slots=True)
class KafkaRecord:
    """One record for Kafka. `key`/`value` are Connect values (dicts in schema field order) that
    go with `key_schema`/`value_schema`; a tombstone has `value` and `value_schema` None, a
    record without Kafka key (advanced format without the `kafka-key` placement) `key` and
    `key_schema` None. `headers`: (name, bytes) pairs, in order."""

    topic: str
    key: dict[str, Any] | None
    key_schema: ConnectSchema | None
    value: dict[str, Any] | None
    value_schema: ConnectSchema | None
    headers: tuple[tuple[str, bytes], ...] = ()

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


class DropReason(Enum):
    """Changes that give no data event (design.md 2.2); each is counted."""

    RANGE_DELETE = "range_delete"
    CLUSTERED_PARTITION_DELETE = "partition_delete_clustered"


_NONE_MISSING: Mapping[str, int] = MappingProxyType({})


@dataclass(slots=True)
class Translation:
    """The records of one change record, in order, what was dropped (reason -> count), and the
    images the advanced format's modes asked for that the record lacked ("before" / "after" ->
    count; those events went out with that image null)."""

    records: tuple[KafkaRecord, ...]
    dropped: Mapping[DropReason, int] = field(default_factory=dict)
    missing_images: Mapping[str, int] = field(default_factory=lambda: _NONE_MISSING)
