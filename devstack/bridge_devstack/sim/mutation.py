"""The write model: what one statement or batch does to one partition of one table.

This mirrors ScyllaDB's mutation: cells with timestamps (and TTLs when live), row markers,
collection-wide tombstones plus per-element cells, row tombstones, range tombstones and a
partition tombstone. All statements of a batch that hit one partition are merged into one
`PartitionMutation` with the usual reconciliation (the higher timestamp wins; at equal timestamps
a tombstone wins, then the greater value), and CDC log rows are derived from the merged result.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bridge.scylla.schema import CqlType, TableSchema
from bridge_devstack.sim.clustering import ClusteringRange
from bridge_devstack.sim.values import serialize


@dataclass(frozen=True, slots=True)
class Cell:
    """A written cell: live with a value (set elements have none), or a tombstone (`live=False`).
    `ttl` is only meaningful on live cells; None means no TTL."""

    timestamp: int
    live: bool = True
    value: Any = None
    ttl: int | None = None

    @property
    def group_ttl(self) -> int:
        """The TTL this cell is grouped under for CDC: dead cells and cells without TTL count 0."""
        return (self.ttl or 0) if self.live else 0


def reconcile(old: Cell | None, new: Cell, value_type: CqlType | None) -> Cell:
    """The cell that survives when both are written to the same place."""
    if old is None or new.timestamp > old.timestamp:
        return new
    if new.timestamp < old.timestamp:
        return old
    if old.live != new.live:
        return old if not old.live else new
    if not new.live or value_type is None or new.value is None or old.value is None:
        return new
    return new if serialize(new.value, value_type) > serialize(old.value, value_type) else old


@dataclass(slots=True)
class CollectionWrite:
    """A non-frozen collection or UDT column: an optional collection-wide tombstone and element
    cells keyed by map key, set element, list timeuuid or UDT field index."""

    tombstone: int | None = None
    elements: dict[Any, Cell] = field(default_factory=dict)

    def delete(self, timestamp: int) -> None:
        if self.tombstone is None or timestamp > self.tombstone:
            self.tombstone = timestamp


@dataclass(slots=True)
class RowWrite:
    """Changes to one row (the static row, or one clustered row)."""

    marker: Cell | None = None
    cells: dict[str, Cell] = field(default_factory=dict)
    collections: dict[str, CollectionWrite] = field(default_factory=dict)
    deletion: int | None = None

    @property
    def is_empty(self) -> bool:
        return self.marker is None and not self.cells and not self.collections and self.deletion is None

    def touched_columns(self) -> set[str]:
        return set(self.cells) | set(self.collections)

    def timestamps(self) -> Iterator[int]:
        """The CDC bucket timestamps of everything in the row (collection tombstones count +1)."""
        if self.marker is not None:
            yield self.marker.timestamp
        for cell in self.cells.values():
            yield cell.timestamp
        for collection in self.collections.values():
            if collection.tombstone is not None:
                yield collection.tombstone + 1
            for element in collection.elements.values():
                yield element.timestamp
        if self.deletion is not None:
            yield self.deletion


@dataclass(frozen=True, slots=True)
class RangeTombstone:
    range: ClusteringRange
    timestamp: int


@dataclass(slots=True)
class PartitionMutation:
    """Everything one statement or batch writes to one partition of one table."""

    table: TableSchema
    key: tuple[Any, ...]
    tombstone: int | None = None
    static: RowWrite = field(default_factory=RowWrite)
    rows: dict[tuple[Any, ...], RowWrite] = field(default_factory=dict)
    ranges: list[RangeTombstone] = field(default_factory=list)

    def row(self, ck: tuple[Any, ...]) -> RowWrite:
        return self.rows.setdefault(ck, RowWrite())

    def delete_partition(self, timestamp: int) -> None:
        if self.tombstone is None or timestamp > self.tombstone:
            self.tombstone = timestamp

    def delete_range(self, rng: ClusteringRange, timestamp: int) -> None:
        for i, existing in enumerate(self.ranges):
            if existing.range == rng:
                self.ranges[i] = RangeTombstone(rng, max(timestamp, existing.timestamp))
                return
        self.ranges.append(RangeTombstone(rng, timestamp))

    def timestamps(self) -> set[int]:
        result = set(self.static.timestamps())
        for row in self.rows.values():
            result.update(row.timestamps())
        result.update(r.timestamp for r in self.ranges)
        if self.tombstone is not None:
            result.add(self.tombstone)
        return result

    @property
    def is_empty(self) -> bool:
        return (
            self.tombstone is None
            and self.static.is_empty
            and not self.ranges
            and all(row.is_empty for row in self.rows.values())
        )


def set_marker(row: RowWrite, cell: Cell) -> None:
    row.marker = reconcile(row.marker, cell, None)


def set_cell(row: RowWrite, column: str, cell: Cell, value_type: CqlType) -> None:
    row.cells[column] = reconcile(row.cells.get(column), cell, value_type)


def set_element(row: RowWrite, column: str, key: Any, cell: Cell, value_type: CqlType | None) -> None:
    collection = row.collections.setdefault(column, CollectionWrite())
    collection.elements[key] = reconcile(collection.elements.get(key), cell, value_type)


def delete_collection(row: RowWrite, column: str, timestamp: int) -> None:
    row.collections.setdefault(column, CollectionWrite()).delete(timestamp)


def delete_row(row: RowWrite, timestamp: int) -> None:
    if row.deletion is None or timestamp > row.deletion:
        row.deletion = timestamp
