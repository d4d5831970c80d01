"""`cdc$time` timeuuids and write timestamps in microseconds (cdc-log-format.md section 5)."""

from __future__ import annotations

import secrets
import uuid

# 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
UUID_EPOCH_OFFSET = 0x01B21DD213814000

# Bounds of the low 64 bits under Cassandra's timeuuid order (signed-byte compare of the low
# bytes), as used by minTimeuuid()/maxTimeuuid().
_MIN_LOW = 0x8080808080808080
_MAX_LOW = 0x7F7F7F7F7F7F7F7F


def micros_of(time_uuid: uuid.UUID) -> int:
    """The write timestamp (µs since the Unix epoch) a `cdc$time` value carries."""
    return (time_uuid.time - UUID_EPOCH_OFFSET) // 10


def _from_ts60_and_low(ts60: int, low: int) -> uuid.UUID:
    time_low = ts60 & 0xFFFFFFFF
    time_mid = (ts60 >> 32) & 0xFFFF
    time_hi_and_version = ((ts60 >> 48) & 0x0FFF) | 0x1000
    high = (time_low << 32) | (time_mid << 16) | time_hi_and_version
    return uuid.UUID(int=(high << 64) | low)


def timeuuid_for(micros: int, low: int | None = None) -> uuid.UUID:
    """A fresh `cdc$time` for a record at `micros`: random low bits with the IETF variant."""
    if low is None:
        low = (secrets.randbits(64) & 0x3FFFFFFFFFFFFFFF) | 0x8000000000000000
    return _from_ts60_and_low(micros * 10 + UUID_EPOCH_OFFSET, low)


def min_timeuuid(micros: int) -> uuid.UUID:
    """The smallest timeuuid at `micros` (what CQL's minTimeuuid gives, at µs precision)."""
    return _from_ts60_and_low(micros * 10 + UUID_EPOCH_OFFSET, _MIN_LOW)


def max_timeuuid(micros: int) -> uuid.UUID:
    """The largest timeuuid at `micros` + 0.9 µs (the whole microsecond)."""
    return _from_ts60_and_low(micros * 10 + 9 + UUID_EPOCH_OFFSET, _MAX_LOW)


_SIGN_BITS = 0x8080808080808080


def timeuuid_sort_key(value: uuid.UUID) -> tuple[int, int]:
    """Cassandra's timeuuid order: timestamp first, then the low 8 bytes as signed bytes.
    Flipping every byte's sign bit turns that byte-wise signed order into the order of one
    unsigned 64-bit number; plain integer arithmetic, as this runs for every log row."""
    n = value.int
    return ((n >> 64) & 0x0FFF) << 48 | ((n >> 80) & 0xFFFF) << 32 | n >> 96, (n & 0xFFFF_FFFF_FFFF_FFFF) ^ _SIGN_BITS


def timeuuid_from_ts60(ts60: int, low: int) -> uuid.UUID:
    """A version-1 UUID from its 60-bit timestamp (100-ns units since 1582-10-15) and low 64 bits;
    for timeuuids that are not `cdc$time` values, such as ScyllaDB's list element keys."""
    return _from_ts60_and_low(ts60, low)
