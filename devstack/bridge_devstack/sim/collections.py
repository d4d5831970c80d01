"""Element-level details of non-frozen collections and UDTs: list keys and element types.

List elements are keyed by timeuuids (cdc-log-format.md 3.3). An append key is what current
ScyllaDB makes (`UUID_gen::get_time_UUID_bytes_from_micros_and_submicros`): every key of one
statement or batch carries the write's microsecond timestamp, the statement's append sequence
number goes into the 14-bit clock sequence (its sign bit flipped, as timeuuids compare their low
bytes signed) and, past 16383 elements, into the 100-ns digits of the time; the node is the
coordinator's spoof node. (An older doc example put the sequence into the time field.) A prepend
key uses the mirrored time `2 * (2010-01-01) - T` so it sorts before every appended key.
"""

from __future__ import annotations

import secrets
import uuid

from bridge.scylla.cdc_time import UUID_EPOCH_OFFSET, timeuuid_from_ts60
from bridge.scylla.schema import CqlType
from bridge_devstack.sim.errors import InvalidRequestError

# 2010-01-01T00:00:00Z in microseconds: the reference point of prepend keys.
PREPEND_REFERENCE_US = 1_262_304_000_000_000
_SPOOF_NODE = 0x000000000001


def coordinator_low_bits() -> int:
    """The clock-sequence-and-node half of list keys: a random clock sequence with the IETF
    variant, and the spoof node 1, fixed for the life of one emulator (one "coordinator")."""
    clock_seq = (secrets.randbits(14) | 0x8000) & 0xBFFF
    return (clock_seq << 48) | _SPOOF_NODE


# Append sequence numbers fit 14 bits of clock sequence plus 3 bits of sub-microsecond time.
SUBMICRO_LIMIT = 1 << 17
_NODE_BITS = (1 << 48) - 1


class ListKeys:
    """Generates list element keys; one instance per statement or batch, as ScyllaDB keeps one
    append counter per query."""

    def __init__(self, low_bits: int) -> None:
        self.low_bits = low_bits
        self.sequence = 0  # of prepended keys (in their time field)
        self.append_sequence = 0

    def _key(self, micros: int) -> uuid.UUID:
        ts60 = micros * 10 + UUID_EPOCH_OFFSET + self.sequence
        self.sequence += 1
        return timeuuid_from_ts60(ts60, self.low_bits)

    def append(self, timestamp: int, count: int) -> list[uuid.UUID]:
        keys = []
        for _ in range(count):
            sequence = self.append_sequence
            if sequence >= SUBMICRO_LIMIT:
                raise InvalidRequestError("Too many list values per single CQL statement or batch")
            self.append_sequence += 1
            ts60 = timestamp * 10 + UUID_EPOCH_OFFSET + ((sequence >> 14) & 0b111)
            clock_seq = (sequence & 0x3FFF) ^ 0x80
            low = ((clock_seq | 0x8000) << 48) | (self.low_bits & _NODE_BITS)
            keys.append(timeuuid_from_ts60(ts60, low))
        return keys

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
