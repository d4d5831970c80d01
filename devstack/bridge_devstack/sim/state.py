"""Row state of one base partition, as pre-images see it and post-images rebuild it.

ScyllaDB reads the touched rows before the write (one read for pre- and post-images), emits
pre-images from that state, and computes post-images by applying each record's changes to it,
carrying the state forward from record to record (cdc-log-format.md 4.1-4.3). Values are kept in
a mutable working form: maps as dicts, sets as sets, lists as `{timeuuid: value}` dicts, UDTs as
lists of field values; `frozen_value` turns one into the log's canonical form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.scylla.schema import Column, CqlType, TableSchema
from bridge_devstack.sim.clustering import ClusteringRange, contains
from bridge_devstack.sim.mutation import CollectionWrite, RowWrite
from bridge_devstack.sim.values import FrozenDict, canonical, sorted_values

Row = dict[str, Any]


@dataclass(slots=True)
class PartitionState:
    """`static` holds the static columns (None: no static row); `rows` every clustered row that
    exists (a table without clustering key keeps its single row under the key `()`)."""

    static: Row | None = None
    rows: dict[tuple[Any, ...], Row] = field(default_factory=dict)

    def static_exists(self) -> bool:
        return self.static is not None and any(v is not None for v in self.static.values())


def working_value(value: Any, cql_type: CqlType) -> Any:
    """Canonical value (as read) -> mutable working form for a multi-cell column."""
    if value is None or not cql_type.is_multi_cell:
        return value
    if cql_type.kind in ("map", "list"):
        return dict(value)
    if cql_type.kind == "set":
        return set(value)
    return list(value)


def frozen_value(value: Any, cql_type: CqlType) -> Any:
    """Working form -> the canonical log value (None for an empty collection or all-null UDT)."""
    if value is None or not cql_type.is_multi_cell:
        return value
    if cql_type.kind == "udt":
        return tuple(value) if any(v is not None for v in value) else None
    if not value:
        return None
    if cql_type.kind == "set":
        return frozenset(value)
    key_type = cql_type.params[0] if cql_type.kind == "map" else CqlType("timeuuid")
    return FrozenDict((k, value[k]) for k in sorted_values(value, key_type))


def row_from_read(values: dict[str, Any], columns: Iterable[Column]) -> Row:
    """A row as read from the base table; non-frozen lists are left out (None) because CQL does
    not show their keys: the caller fills them in from the shadow table."""
    return {c.name: None if _is_list(c.type) else working_value(canonical(values.get(c.name)), c.type) for c in columns}


def _is_list(cql_type: CqlType) -> bool:
    return cql_type.kind == "list" and not cql_type.frozen


def apply_upsert(row: Row, write: RowWrite, columns: Sequence[Column]) -> None:
    """Apply a row's cells (one record's worth) to its working state."""
    types = {c.name: c.type for c in columns}
    for name, cell in write.cells.items():
        row[name] = cell.value if cell.live else None
    for name, collection in write.collections.items():
        row[name] = _apply_collection(row.get(name), collection, types[name])


def _apply_collection(current: Any, change: CollectionWrite, cql_type: CqlType) -> Any:
    kind = cql_type.kind
    if kind == "udt":
        fields: list[Any] = list(current) if current is not None else [None] * len(cql_type.params)
        if change.tombstone is not None:
            fields = [None] * len(cql_type.params)
        for index, cell in change.elements.items():
            fields[index] = cell.value if cell.live else None
        return fields
    if kind == "set":
        members: set[Any] = set() if change.tombstone is not None or current is None else set(current)
        for key, cell in change.elements.items():
            (members.add if cell.live else members.discard)(key)
        return members
    entries: dict[Any, Any] = {} if change.tombstone is not None or current is None else dict(current)
    for key, cell in change.elements.items():
        if cell.live:
            entries[key] = cell.value
        else:
            entries.pop(key, None)
    return entries


def drop_range(state: PartitionState, rng: ClusteringRange, table: TableSchema) -> None:
    for ck in [ck for ck in state.rows if contains(rng, ck, table.clustering_key)]:
        del state.rows[ck]
