"""ScyllaDB CDC stream IDs: 16 bytes, big-endian, compared as bytes.

Layout (cdc-log-format.md 6.1)::

    bits 127..64  token (signed int64)
    bits  63..26  random (38 bits)
    bits  25..4   vnode index (22 bits); always 0 for tablet streams
    bits   3..0   version (only 1 exists)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

VERSION_1 = 1
_RANDOM_BITS = 38
_INDEX_BITS = 22
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_RANDOM_MASK = (1 << _RANDOM_BITS) - 1


@dataclass(frozen=True, order=True, slots=True)
class StreamId:
    """One CDC stream. Ordering is byte order, as ScyllaDB compares blobs."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 16:
            raise ValueError(f"a CDC stream id is 16 bytes, got {len(self.raw)}")

    @classmethod
    def build(cls, token: int, random_bits: int, index: int, version: int = VERSION_1) -> StreamId:
        if not 0 <= index <= _INDEX_MASK:
            raise ValueError(f"vnode index {index} does not fit in {_INDEX_BITS} bits")
        low = ((random_bits & _RANDOM_MASK) << 26) | (index << 4) | (version & 0xF)
        return cls(struct.pack(">qQ", token, low))

    @classmethod
    def from_hex(cls, text: str) -> StreamId:
        return cls(bytes.fromhex(text.removeprefix("0x")))

    @property
    def token(self) -> int:
        return int(struct.unpack_from(">q", self.raw, 0)[0])

    @property
    def _low(self) -> int:
        return int(struct.unpack_from(">Q", self.raw, 8)[0])

    @property
    def version(self) -> int:
        return self._low & 0xF

    @property
    def index(self) -> int:
        return (self._low >> 4) & _INDEX_MASK

    @property
    def random_bits(self) -> int:
        return (self._low >> 26) & _RANDOM_MASK

    def hex(self) -> str:
        return self.raw.hex()

    def __str__(self) -> str:
        return "0x" + self.raw.hex()
