"""Element-level details of non-frozen collections and UDTs: list keys and element types.

List elements are keyed by timeuuids (cdc-log-format.md 3.3): an append key carries the write's
microsecond timestamp plus a sub-microsecond sequence number, and the coordinator's fixed clock
sequence and node; a prepend key uses the mirrored time `2 * (2010-01-01) - T` so it sorts before
every appended key.
"""

from __future__ import annotations

import secrets
import uuid

from bridge.scylla.cdc_time import UUID_EPOCH_OFFSET, timeuuid_from_ts60
from bridge.scylla.schema import CqlType
from bridge.sim.errors import InvalidRequestError

# 2010-01-01T00:00:00Z in microseconds: the reference point of prepend keys.
PREPEND_REFERENCE_US = 1_262_304_000_000_000
_SPOOF_NODE = 0x000000000001


def coordinator_low_bits() -> int:
    """The clock-sequence-and-node half of list keys: a random clock sequence with the IETF
    variant, and the spoof node 1, fixed for the life of one emulator (one "coordinator")."""
    clock_seq = (secrets.randbits(14) | 0x8000) & 0xBFFF
    return (clock_seq << 48) | _SPOOF_NODE


class ListKeys:
    """Generates list element keys; one instance per statement or batch, as ScyllaDB keeps one
    sub-microsecond counter per query."""

    def __init__(self, low_bits: int) -> None:
        self.low_bits = low_bits
        self.sequence = 0

    def _key(self, micros: int) -> uuid.UUID:
        ts60 = micros * 10 + UUID_EPOCH_OFFSET + self.sequence
        self.sequence += 1
        return timeuuid_from_ts60(ts60, self.low_bits)

    def append(self, timestamp: int, count: int) -> list[uuid.UUID]:
        return [self._key(timestamp) for _ in range(count)]

    def prepend(self, timestamp: int, count: int) -> list[uuid.UUID]:
        if timestamp < PREPEND_REFERENCE_US:
            raise InvalidRequestError(f"List prepend custom timestamp must be greater than {PREPEND_REFERENCE_US}")
        mirrored = 2 * PREPEND_REFERENCE_US - timestamp
        return [self._key(mirrored) for _ in range(count)]


def element_type(column_type: CqlType) -> CqlType | None:
    """The type of an element's value: map values, list items; None for sets and UDTs."""
    if column_type.kind == "map":
        return column_type.params[1]
    if column_type.kind == "list":
        return column_type.params[0]
    return None
