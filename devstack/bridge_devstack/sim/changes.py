"""The heart of the emulator: one partition mutation + the rows' prior state -> CDC log records.

Pure code (no I/O), following ScyllaDB's `cdc/split.cc` and `cdc/log.cc` as cdc-log-format.md
sections 3 to 5 describe them:

1. The mutation's pieces are bucketed by timestamp (a collection-wide tombstone at `t` counts as
   `t + 1`); each bucket is one record.
2. Inside a bucket, changes are grouped per row and TTL and emitted in this order: static-row
   updates (ascending TTL), clustered inserts (the group holding the row marker), clustered
   updates (ascending TTL per row), row deletes, range deletes, the partition delete. A mutation
   with a single timestamp, a single TTL and a single kind of change takes ScyllaDB's "no split"
   path instead, where inserts and updates come out together in clustering order.
3. Pre-images come first and post-images last in each record; the row state is carried from one
   record to the next.

Stream ids and `cdc$time` values are not chosen here: a `PendingRecord` only carries its
timestamp, and the caller places it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bridge.scylla import log_schema as cols
from bridge.scylla.model import Operation
from bridge.scylla.schema import Column, ColumnKind, ImageMode, TableSchema
from bridge_devstack.sim.clustering import Bound, contains, row_key
from bridge_devstack.sim.mutation import Cell, CollectionWrite, PartitionMutation, RowWrite
from bridge_devstack.sim.state import PartitionState, apply_upsert, drop_range, frozen_value


@dataclass(frozen=True, slots=True)
class PendingRow:
    """One log row before it gets its stream, `cdc$time`, `cdc$batch_seq_no` and end-of-batch
    flag. `values` holds only the non-null base-derived columns (keys, values, deleted flags)."""

    operation: Operation
    ttl: int | None
    values: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PendingRecord:
    timestamp: int
    rows: tuple[PendingRow, ...]


@dataclass(slots=True)
class _Group:
    """The cells of one row sharing one TTL inside one bucket."""

    cells: dict[str, Cell] = field(default_factory=dict)
    collections: dict[str, CollectionWrite] = field(default_factory=dict)
    marker: Cell | None = None

    def collection(self, name: str) -> CollectionWrite:
        return self.collections.setdefault(name, CollectionWrite())


def compute_records(mutation: PartitionMutation, state: PartitionState) -> list[PendingRecord]:
    """All records of a mutation, oldest first. `state` is the rows' state before the write (only
    needed for images) and is updated in place to the state after it."""
    no_split = not should_split(mutation)
    return [_record(bucket(mutation, ts), ts, state, no_split) for ts in sorted(mutation.timestamps())]


def bucket(mutation: PartitionMutation, ts: int) -> PartitionMutation:
    """The part of `mutation` whose CDC timestamp is `ts`."""
    part = PartitionMutation(mutation.table, mutation.key)
    if mutation.tombstone == ts:
        part.tombstone = ts
    part.ranges = [r for r in mutation.ranges if r.timestamp == ts]
    part.static = _row_bucket(mutation.static, ts)
    for ck, row in mutation.rows.items():
        sub = _row_bucket(row, ts)
        if not sub.is_empty:
            part.rows[ck] = sub
    return part


def _row_bucket(row: RowWrite, ts: int) -> RowWrite:
    sub = RowWrite()
    if row.marker is not None and row.marker.timestamp == ts:
        sub.marker = row.marker
    sub.cells = {name: cell for name, cell in row.cells.items() if cell.timestamp == ts}
    for name, collection in row.collections.items():
        elements = {k: c for k, c in collection.elements.items() if c.timestamp == ts}
        tombstone = (
            collection.tombstone if collection.tombstone is not None and collection.tombstone + 1 == ts else None
        )
        if elements or tombstone is not None:
            sub.collections[name] = CollectionWrite(tombstone, elements)
    if row.deletion == ts:
        sub.deletion = ts
    return sub


def should_split(mutation: PartitionMutation) -> bool:
    """ScyllaDB's test for taking the per-timestamp, per-TTL splitting path."""
    if len(mutation.timestamps()) > 1:
        return True
    ttls: set[int] = set()
    kinds: set[str] = set()
    had_marker = False
    rows = [(None, mutation.static)] + [(ck, mutation.rows[ck]) for ck in _ordered(mutation)]
    for ck, row in rows:
        if row.marker is not None:
            had_marker = True
            ttls.add(row.marker.group_ttl)
        for cell in row.cells.values():
            ttls.add(cell.group_ttl)
        for collection in row.collections.values():
            if collection.tombstone is not None:
                ttls.add(0)
            for element in collection.elements.values():
                if element.live and had_marker:
                    return True  # an INSERT cannot express element updates
                ttls.add(element.group_ttl)
        if row.marker is not None or row.cells or row.collections:
            kinds.add("static" if ck is None else "clustered")
        if row.deletion is not None:
            kinds.add("row delete")
    if mutation.ranges:
        kinds.add("range delete")
    if mutation.tombstone is not None:
        kinds.add("partition delete")
    return len(ttls) > 1 or len(kinds) > 1


def _ordered(mutation: PartitionMutation) -> list[tuple[Any, ...]]:
    columns = mutation.table.clustering_key
    return sorted(mutation.rows, key=lambda ck: row_key(ck, columns))


# ---------------------------------------------------------------- one record


def _record(part: PartitionMutation, ts: int, state: PartitionState, no_split: bool) -> PendingRecord:
    table = part.table
    options = table.cdc
    ordered = _ordered(part)
    rows: list[PendingRow] = []
    if options.preimage is not ImageMode.OFF:
        rows += _pre_images(part, ordered, state)
    rows += _deltas(part, ordered, no_split)
    touched_static, touched_rows = _apply(part, ordered, state)
    if options.postimage:
        rows += _post_images(part, touched_static, touched_rows, state)
    return PendingRecord(ts, tuple(rows))


def _deltas(part: PartitionMutation, ordered: list[tuple[Any, ...]], no_split: bool) -> list[PendingRow]:
    table = part.table
    static_rows = [
        _delta_row(table, part.key, None, Operation.UPDATE, ttl, group)
        for ttl, group in sorted(_groups(part.static).items())
    ]
    inserts: list[tuple[Any, PendingRow]] = []
    updates: list[tuple[Any, PendingRow]] = []
    for ck in ordered:
        row = part.rows[ck]
        groups = _groups(row)
        marker_ttl = row.marker.group_ttl if row.marker is not None else None
        for ttl, group in sorted(groups.items()):
            if ttl == marker_ttl:
                insert = _Group(group.cells, {n: c for n, c in group.collections.items() if c.tombstone is not None})
                inserts.append((ck, _delta_row(table, part.key, ck, Operation.INSERT, ttl, insert)))
                rest = {n: c for n, c in group.collections.items() if c.tombstone is None}
                if rest:
                    updates.append((ck, _delta_row(table, part.key, ck, Operation.UPDATE, ttl, _Group({}, rest))))
            else:
                updates.append((ck, _delta_row(table, part.key, ck, Operation.UPDATE, ttl, group)))
    if no_split:
        keys = {ck: i for i, ck in enumerate(ordered)}
        upserts = [r for _, r in sorted(inserts + updates, key=lambda item: keys[item[0]])]
    else:
        upserts = [r for _, r in inserts] + [r for _, r in updates]
    deletes = [
        _key_row(table, part.key, ck, Operation.ROW_DELETE) for ck in ordered if part.rows[ck].deletion is not None
    ]
    return static_rows + upserts + deletes + _range_rows(part) + _partition_rows(part)


def _groups(row: RowWrite) -> dict[int, _Group]:
    groups: dict[int, _Group] = {}
    if row.marker is not None:
        groups.setdefault(row.marker.group_ttl, _Group()).marker = row.marker
    for name, cell in row.cells.items():
        groups.setdefault(cell.group_ttl, _Group()).cells[name] = cell
    for name, collection in row.collections.items():
        if collection.tombstone is not None:
            groups.setdefault(0, _Group()).collection(name).tombstone = collection.tombstone
        for key, cell in collection.elements.items():
            groups.setdefault(cell.group_ttl, _Group()).collection(name).elements[key] = cell
        if collection.tombstone is None and not collection.elements:
            groups.setdefault(0, _Group()).collection(name)
    return groups


def _key_values(table: TableSchema, pk: tuple[Any, ...], ck: tuple[Any, ...] | None) -> dict[str, Any]:
    values = {c.name: v for c, v in zip(table.partition_key, pk, strict=True)}
    if ck:
        values.update({c.name: v for c, v in zip(table.clustering_key, ck, strict=False)})
    return values


def _key_row(table: TableSchema, pk: tuple[Any, ...], ck: tuple[Any, ...] | None, op: Operation) -> PendingRow:
    return PendingRow(op, None, _key_values(table, pk, ck))


def _delta_row(
    table: TableSchema, pk: tuple[Any, ...], ck: tuple[Any, ...] | None, op: Operation, ttl: int, group: _Group
) -> PendingRow:
    values = _key_values(table, pk, ck)
    if table.cdc.delta_full:
        for name, cell in group.cells.items():
            if cell.live:
                values[name] = cell.value
            else:
                values[cols.deleted_column(name)] = True
        for name, collection in group.collections.items():
            values.update(_collection_values(table.column(name), collection))
    return PendingRow(op, ttl or None, values)


def _collection_values(column: Column, change: CollectionWrite) -> dict[str, Any]:
    kind = column.type.kind
    values: dict[str, Any] = {}
    if change.tombstone is not None:
        values[cols.deleted_column(column.name)] = True
    live = {k: c.value for k, c in change.elements.items() if c.live}
    dead = frozenset(k for k, c in change.elements.items() if not c.live)
    if kind == "udt":
        # The UDT quirk: a touched UDT always logs a UDT value, unassigned fields null.
        values[column.name] = tuple(live.get(i) for i in range(len(column.type.params)))
    elif live:
        working: Any = set(live) if kind == "set" else live
        values[column.name] = frozen_value(working, column.type)
    if dead:
        values[cols.deleted_elements_column(column.name)] = dead
    return values


def _range_rows(part: PartitionMutation) -> list[PendingRow]:
    table = part.table
    rows: list[PendingRow] = []
    for tombstone in sorted(part.ranges, key=lambda r: _bound_key(r.range.start, table)):
        start, end = tombstone.range.start, tombstone.range.end
        start_op = Operation.RANGE_DELETE_START_INCLUSIVE if start.inclusive else Operation.RANGE_DELETE_START_EXCLUSIVE
        end_op = Operation.RANGE_DELETE_END_INCLUSIVE if end.inclusive else Operation.RANGE_DELETE_END_EXCLUSIVE
        rows.append(_key_row(table, part.key, start.prefix, start_op))
        rows.append(_key_row(table, part.key, end.prefix, end_op))
    return rows


def _bound_key(bound: Bound, table: TableSchema) -> tuple[Any, ...]:
    return (len(bound.prefix) > 0, row_key(bound.prefix, table.clustering_key))


def _partition_rows(part: PartitionMutation) -> list[PendingRow]:
    if part.tombstone is None:
        return []
    return [_key_row(part.table, part.key, None, Operation.PARTITION_DELETE)]


# ---------------------------------------------------------------- images and state


def _columns(table: TableSchema, kind: ColumnKind) -> tuple[Column, ...]:
    return tuple(c for c in table.value_columns if c.kind is kind)


def _pre_images(part: PartitionMutation, ordered: list[tuple[Any, ...]], state: PartitionState) -> list[PendingRow]:
    table = part.table
    full = table.cdc.preimage is ImageMode.FULL
    rows: list[PendingRow] = []
    static_touched = part.static.touched_columns()
    if static_touched and state.static_exists():
        chosen = _columns(table, ColumnKind.STATIC) if full else _chosen(table, static_touched)
        rows.append(_image_row(table, part.key, None, Operation.PRE_IMAGE, state.static or {}, chosen, True))
    targets = list(ordered)
    if not table.clustering_key and part.tombstone is not None and () not in part.rows:
        targets.append(())  # a partition delete without clustering key shows the row it deletes
    for ck in targets:
        if ck not in state.rows:
            continue
        write = part.rows.get(ck, RowWrite())
        whole_row = write.deletion is not None or (not table.clustering_key and part.tombstone is not None)
        regular = _columns(table, ColumnKind.REGULAR)
        chosen = regular if full or whole_row else _chosen(table, write.touched_columns())
        rows.append(_image_row(table, part.key, ck, Operation.PRE_IMAGE, state.rows[ck], chosen, True))
    return rows


def _chosen(table: TableSchema, names: set[str]) -> tuple[Column, ...]:
    return tuple(c for c in table.value_columns if c.name in names)


def _image_row(
    table: TableSchema,
    pk: tuple[Any, ...],
    ck: tuple[Any, ...] | None,
    op: Operation,
    row: dict[str, Any],
    chosen: tuple[Column, ...],
    mark_nulls: bool,
) -> PendingRow:
    values = _key_values(table, pk, ck)
    for column in chosen:
        value = frozen_value(row.get(column.name), column.type)
        if value is not None:
            values[column.name] = value
        elif mark_nulls:
            values[cols.deleted_column(column.name)] = True
    return PendingRow(op, None, values)


def _apply(
    part: PartitionMutation, ordered: list[tuple[Any, ...]], state: PartitionState
) -> tuple[bool, list[tuple[Any, ...]]]:
    """Apply one record to the state; returns whether the static row and which clustered rows
    were upserted and survive the record's own deletions (the rows that get post-images)."""
    table = part.table
    if part.tombstone is not None:
        state.static = None
        state.rows.clear()
    for tombstone in part.ranges:
        drop_range(state, tombstone.range, table)
    survivors: list[tuple[Any, ...]] = []
    for ck in ordered:
        write = part.rows[ck]
        if write.deletion is not None:
            state.rows.pop(ck, None)
            continue
        if write.marker is None and not write.cells and not write.collections:
            continue
        if part.tombstone is not None or any(contains(r.range, ck, table.clustering_key) for r in part.ranges):
            continue
        apply_upsert(state.rows.setdefault(ck, {}), write, table.value_columns)
        survivors.append(ck)
    static_touched = bool(part.static.touched_columns()) and part.tombstone is None
    if static_touched:
        if state.static is None:
            state.static = {}
        apply_upsert(state.static, part.static, table.value_columns)
    return static_touched, survivors


def _post_images(
    part: PartitionMutation, static_touched: bool, rows: list[tuple[Any, ...]], state: PartitionState
) -> Iterator[PendingRow]:
    table = part.table
    if static_touched:
        yield _image_row(
            table, part.key, None, Operation.POST_IMAGE, state.static or {}, _columns(table, ColumnKind.STATIC), False
        )
    regular = _columns(table, ColumnKind.REGULAR)
    for ck in rows:
        yield _image_row(table, part.key, ck, Operation.POST_IMAGE, state.rows[ck], regular, False)
