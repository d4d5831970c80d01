"""Offset records in Kafka Connect's byte format for the Java connector (design.md 2.3).

Connect stores a source offset as key `[<connector name>, <source partition>]` and value
`<source offset>`, both through a schemas-disabled JsonConverter, and looks offsets up by the
exact key bytes. The Java connector builds both maps with `Collect.hashMapOf`, a
`java.util.HashMap`, so Jackson writes the fields in HashMap iteration order (bucket of
`String.hashCode()` spread by `h ^ h >>> 16`, table of 16), not in insertion order. We write
the same order, so our keys are byte-identical to the connector's: compaction and a resume from
`connect-offsets` both work on those bytes.

Pure code: bytes in, value objects out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson

from bridge.envelope.json_serializer import payload_bytes
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position


def _java_string_hash(text: str) -> int:
    units = text.encode("utf-16-be")  # Java hashes UTF-16 code units
    value = 0
    for index in range(0, len(units), 2):
        value = (31 * value + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return value


def _hashmap_order(keys: Iterable[str], capacity: int = 16) -> list[str]:
    """The iteration order of a `java.util.HashMap` holding `keys` (inserted in this order)."""

    def bucket(key: str) -> int:
        spread = _java_string_hash(key)
        return (spread ^ (spread >> 16)) & (capacity - 1)

    inserted = list(keys)
    return sorted(inserted, key=lambda key: (bucket(key), inserted.index(key)))


def _java_map(entries: Mapping[str, str]) -> dict[str, str]:
    return {key: entries[key] for key in _hashmap_order(entries)}


def encode_key(name: str, group: GroupId) -> bytes:
    """`["<name>",{"keyspace_name":..,"vnode_id":..,"generation_start":..,"table_name":..}]`."""
    return payload_bytes([name, _java_map(group.offsets_key())])


def encode_value(position: Position) -> bytes:
    return payload_bytes(_java_map(position.to_offsets_value()))


def decode_key(data: bytes) -> tuple[str, GroupId] | None:
    """The connector name and group of an offsets key; None for a key that is not a CDC
    source partition (other connectors share `connect-offsets`)."""
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not (isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[0], str)):
        return None
    if not isinstance(decoded[1], dict):
        return None
    try:
        return decoded[0], GroupId.from_offsets_key(decoded[1])
    except ValueError:
        return None


class UnreadableKey(ValueError):
    """An offsets key that is not `[<name>, <CDC source partition>]`. `ours`: it names the
    connector being read (a group of ours lost its key); otherwise its owner is unknown."""

    def __init__(self, reason: str, ours: bool) -> None:
        super().__init__(reason)
        self.ours = ours


def group_of_key(data: bytes | None, name: str) -> GroupId | None:
    """The group of an offsets key of connector `name`; None for another connector's key (they
    share `connect-offsets`, with partitions of their own shapes). Raises UnreadableKey for a key
    that is no Connect offsets key at all, or names `name` with a partition that is no group."""
    try:
        decoded = orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        raise UnreadableKey(f"key is not JSON: {(data or b'')[:80]!r}", ours=False) from None
    if not (isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[0], str)):
        raise UnreadableKey(f"key is not [connector name, partition]: {(data or b'')[:80]!r}", ours=False)
    if decoded[0] != name:
        return None
    if not isinstance(decoded[1], dict):
        raise UnreadableKey(f"partition is not a JSON object: {(data or b'')[:120]!r}", ours=True)
    try:
        return GroupId.from_offsets_key(decoded[1])
    except ValueError as error:
        raise UnreadableKey(str(error), ours=True) from None


def decode_value(data: bytes) -> Position:
    """Raises ValueError for a value that is not a CDC offset."""
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"offsets value is not JSON: {error}") from error
    if not isinstance(decoded, dict):
        raise ValueError(f"offsets value is not a JSON object: {data[:120]!r}")
    try:
        return Position.from_offsets_value(decoded)
    except (TypeError, AttributeError) as error:  # a field of the wrong JSON type
        raise ValueError(f"not a CDC offsets value: {decoded!r} ({error})") from error
