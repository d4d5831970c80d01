"""Canonical Python values of CQL data, and the driver's serialization of them.

The emulator holds every value in one immutable, hashable form (`bridge.scylla.values.canonical`:
maps as `FrozenDict`, sets as `frozenset`, lists, tuples, vectors and UDTs as `tuple`) so that
values can be set elements, map keys and dict keys, and so that what it writes compares equal to
what the driver reads back once that too is made canonical. Scalars stay as the driver takes and
returns them (`int`, `str`, `bytes`, `uuid.UUID`, naive UTC `datetime`, `cassandra.util.Date`/
`Time`, `Decimal`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from cassandra import cqltypes

from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge.scylla.schema import CqlType
from bridge.scylla.values import FrozenDict, canonical

__all__ = ["FrozenDict", "canonical", "driver_type", "routing_key", "serialize", "sort_key", "sorted_values"]

PROTOCOL_VERSION = 5


def driver_type(cql_type: CqlType, keyspace: str = "") -> Any:
    """The cassandra-driver type class that serializes values of `cql_type`."""
    return _driver_type(cql_type, keyspace)


@cache
def _driver_type(cql_type: CqlType, keyspace: str) -> Any:
    kind = cql_type.kind
    if kind in cqltypes._cqltypes and kind not in ("list", "set", "map", "tuple", "frozen"):
        return cqltypes._cqltypes[kind]
    params = [_driver_type(p, keyspace) for p in cql_type.params]
    if kind == "list":
        return cqltypes.ListType.apply_parameters(params)
    if kind == "set":
        return cqltypes.SetType.apply_parameters(params)
    if kind == "map":
        return cqltypes.MapType.apply_parameters(params)
    if kind == "tuple":
        return cqltypes.TupleType.apply_parameters(params)
    if kind == "vector":
        return cqltypes.VectorType.apply_parameters([params[0], cql_type.dimension], None)
    if kind == "udt":
        return cqltypes.UserType.make_udt_class(keyspace, cql_type.udt_name, tuple(cql_type.field_names), tuple(params))
    raise ValueError(f"no driver type for {cql_type}")


def serialize(value: Any, cql_type: CqlType, keyspace: str = "") -> bytes:
    """The value's bytes as CQL native protocol v5 carries them."""
    return bytes(driver_type(cql_type, keyspace).to_binary(value, PROTOCOL_VERSION))


def routing_key(values: Iterable[Any], types: Iterable[CqlType], keyspace: str = "") -> bytes:
    """The partition key's bytes as Murmur3 hashes them: a single component as is, several as
    Cassandra's composite (2-byte length, bytes, 0x00 end-of-component, per component)."""
    parts = [serialize(v, t, keyspace) for v, t in zip(values, types, strict=True)]
    if len(parts) == 1:
        return parts[0]
    return b"".join(len(p).to_bytes(2, "big") + p + b"\x00" for p in parts)


def sort_key(value: Any, cql_type: CqlType) -> Any:
    """A key that orders values of one type the way Cassandra orders them in a clustering column
    or a set/map (ascending)."""
    kind = cql_type.kind
    if kind == "timeuuid":
        return timeuuid_sort_key(value)
    if kind == "uuid":
        # Cassandra's UUIDType: by version, then time for version 1, then the raw bytes.
        return (value.version or 0, value.time if value.version == 1 else 0, value.bytes)
    if kind in ("int", "bigint", "smallint", "tinyint", "varint", "float", "double", "decimal", "counter"):
        return value
    if kind in ("text", "ascii", "varchar"):
        return value.encode("utf-8")
    if kind in ("blob", "inet", "boolean", "timestamp", "date", "time"):
        return value if kind != "inet" else serialize(value, cql_type)
    return serialize(value, cql_type)


def sorted_values(values: Iterable[Any], cql_type: CqlType) -> list[Any]:
    return sorted(values, key=lambda v: sort_key(v, cql_type))
