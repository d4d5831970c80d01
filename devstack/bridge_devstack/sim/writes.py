"""CQL statements (text with `?` markers, plus values) that put a mutation into Cassandra's base
table, its list-key shadow table, and records into the CDC log table. Pure code.

The base write is rendered from the mutation itself, so base and log cannot disagree: every cell,
marker and tombstone is written with its own `USING TIMESTAMP` (and `TTL`). List elements are
addressed the way Cassandra's CQL allows, by position (from the list's keys before the write) or
by appending/prepending; the shadow table keeps the element keys the log shows.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bridge.scylla import log_schema
from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge.scylla.schema import Column, TableSchema, scalar
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim.changes import PendingRow
from bridge_devstack.sim.clustering import ClusteringRange
from bridge_devstack.sim.mutation import Cell, PartitionMutation, RowWrite
from bridge_devstack.sim.render import list_columns, q, qualified, shadow_table_name
from bridge_devstack.sim.values import FrozenDict, sorted_values

ListsBefore = Mapping[tuple[tuple[Any, ...] | None, str], Mapping[uuid.UUID, Any]]


@dataclass(frozen=True, slots=True)
class Write:
    cql: str
    values: tuple[Any, ...]
    partition: Any = None  # the Cassandra partition written (log: stream id bytes), for batching


def _key_where(table: TableSchema, pk: tuple[Any, ...], ck: tuple[Any, ...] | None) -> tuple[str, tuple[Any, ...]]:
    columns = list(table.partition_key) + (list(table.clustering_key) if ck is not None else [])
    values = tuple(pk) + (tuple(ck) if ck is not None else ())
    return " AND ".join(f"{q(c.name)} = ?" for c in columns), values


def _ttl(cell: Cell) -> int:
    return cell.ttl or 0


def base_writes(mutation: PartitionMutation, lists_before: ListsBefore) -> list[Write]:
    table = mutation.table
    target = qualified(table.keyspace, table.name)
    writes: list[Write] = []
    if mutation.tombstone is not None:
        where, keys = _key_where(table, mutation.key, None)
        writes.append(Write(f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where}", (mutation.tombstone, *keys)))
    for tombstone in mutation.ranges:
        where, keys = _key_where(table, mutation.key, None)
        condition, bounds = range_condition(table, tombstone.range)
        writes.append(
            Write(
                f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where} AND {condition}",
                (tombstone.timestamp, *keys, *bounds),
            )
        )
    rows: list[tuple[tuple[Any, ...] | None, RowWrite]] = [(None, mutation.static)]
    rows += list(mutation.rows.items())
    for ck, row in rows:
        writes += _row_writes(table, target, mutation.key, ck, row, lists_before)
    partition = (table.keyspace, table.name, mutation.key)
    return [Write(w.cql, w.values, partition) for w in writes]


def _row_writes(
    table: TableSchema,
    target: str,
    pk: tuple[Any, ...],
    ck: tuple[Any, ...] | None,
    row: RowWrite,
    lists_before: ListsBefore,
) -> list[Write]:
    where, keys = _key_where(table, pk, ck)
    writes: list[Write] = []
    if row.deletion is not None:
        writes.append(Write(f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where}", (row.deletion, *keys)))
    if row.marker is not None and ck is not None:
        names = [c.name for c in table.primary_key]
        writes.append(
            Write(
                f"INSERT INTO {target} ({', '.join(q(n) for n in names)}) VALUES ({', '.join('?' * len(names))})"
                " USING TIMESTAMP ? AND TTL ?",
                (*keys, row.marker.timestamp, _ttl(row.marker)),
            )
        )
    sets: dict[tuple[int, int], list[tuple[str, Any]]] = defaultdict(list)  # (ts, ttl) -> SET items
    deletes: dict[int, list[tuple[str, Any]]] = defaultdict(list)  # ts -> DELETE targets
    for name, cell in row.cells.items():
        if cell.live:
            sets[(cell.timestamp, _ttl(cell))].append((f"{q(name)} = ?", cell.value))
        else:
            deletes[cell.timestamp].append((q(name), None))
    for name, change in row.collections.items():
        column = table.column(name)
        if change.tombstone is not None:
            deletes[change.tombstone].append((q(name), None))
        _element_writes(column, change.elements, lists_before.get((ck, name), {}), sets, deletes)
    for (ts, ttl), items in sets.items():
        assignments = ", ".join(text for text, _ in items)
        values = tuple(v for text, v in items if "?" in text)
        writes.append(
            Write(
                f"UPDATE {target} USING TIMESTAMP ? AND TTL ? SET {assignments} WHERE {where}",
                (ts, ttl, *values, *keys),
            )
        )
    for ts, items in deletes.items():
        targets = ", ".join(text for text, _ in items)
        values = tuple(v for text, v in items if "?" in text)
        writes.append(Write(f"DELETE {targets} FROM {target} USING TIMESTAMP ? WHERE {where}", (*values, ts, *keys)))
    return writes


def _element_writes(
    column: Column,
    elements: Mapping[Any, Cell],
    list_before: Mapping[uuid.UUID, Any],
    sets: dict[tuple[int, int], list[tuple[str, Any]]],
    deletes: dict[int, list[tuple[str, Any]]],
) -> None:
    kind, name = column.type.kind, q(column.name)
    existing = sorted_values(list_before, _TIMEUUID)
    grouped: dict[tuple[int, int], dict[Any, Any]] = defaultdict(dict)
    list_deletes: list[tuple[int, int]] = []
    for key, cell in elements.items():
        if cell.live:
            grouped[(cell.timestamp, _ttl(cell))][key] = cell.value
        elif kind == "map":
            deletes[cell.timestamp].append((f"{name}[?]", key))
        elif kind == "udt":
            deletes[cell.timestamp].append((f"{name}.{q(column.type.field_names[key])}", None))
        elif kind == "set":
            sets[(cell.timestamp, 0)].append((f"{name} = {name} - ?", frozenset([key])))
        elif key in list_before:
            list_deletes.append((cell.timestamp, existing.index(key)))
    # Cassandra applies the positions of one DELETE one after the other: highest position first.
    for timestamp, index in sorted(list_deletes, key=lambda item: -item[1]):
        deletes[timestamp].append((f"{name}[?]", index))
    for group, items in grouped.items():
        if kind == "map":
            sets[group].append((f"{name} = {name} + ?", FrozenDict(items)))
        elif kind == "set":
            sets[group].append((f"{name} = {name} + ?", frozenset(items)))
        elif kind == "udt":
            for index, value in items.items():
                sets[group].append((f"{name}.{q(column.type.field_names[index])} = ?", value))
        else:
            _list_element_writes(name, items, existing, sets[group])


def _list_element_writes(
    name: str, items: Mapping[uuid.UUID, Any], existing: list[uuid.UUID], out: list[tuple[str, Any]]
) -> None:
    """Existing keys are set by position; new keys sorting before every existing key are
    prepended, the others appended (Cassandra picks its own keys for those)."""
    appended, prepended = [], []
    for key in sorted_values(items, _TIMEUUID):
        if key in existing:
            out.append((f"{name}[{existing.index(key)}] = ?", items[key]))
        elif existing and timeuuid_sort_key(key) < timeuuid_sort_key(existing[0]):
            prepended.append(items[key])
        else:
            appended.append(items[key])
    if prepended:
        out.append((f"{name} = ? + {name}", tuple(prepended)))
    if appended:
        out.append((f"{name} = {name} + ?", tuple(appended)))


_TIMEUUID = scalar("timeuuid")


def range_condition(table: TableSchema, rng: ClusteringRange) -> tuple[str, tuple[Any, ...]]:
    """WHERE conditions (after the partition key) selecting a clustering range."""
    columns = table.clustering_key
    start, end = rng.start.prefix, rng.end.prefix
    common = 0
    while common < min(len(start), len(end)) and start[common] == end[common]:
        common += 1
    if start == end:
        return " AND ".join(f"{q(c.name)} = ?" for c in columns[: len(start)]), tuple(start)
    if len(start) <= common + 1 and len(end) <= common + 1:
        parts = [f"{q(c.name)} = ?" for c in columns[:common]]
        values: list[Any] = list(start[:common])
        for bound, is_start in ((rng.start, True), (rng.end, False)):
            if len(bound.prefix) == common + 1:
                column = columns[common]
                lower = is_start != column.descending
                op = (">" if lower else "<") + ("=" if bound.inclusive else "")
                parts.append(f"{q(column.name)} {op} ?")
                values.append(bound.prefix[common])
        return " AND ".join(parts), tuple(values)
    parts, values = [], []
    for bound, op in ((rng.start, ">"), (rng.end, "<")):
        if not bound.unbounded:
            names = ", ".join(q(c.name) for c in columns[: len(bound.prefix)])
            marks = ", ".join("?" * len(bound.prefix))
            parts.append(f"({names}) {op}{'=' if bound.inclusive else ''} ({marks})")
            values += list(bound.prefix)
    return " AND ".join(parts), tuple(values)


# ---------------------------------------------------------------- shadow and log


def shadow_writes(mutation: PartitionMutation) -> list[Write]:
    """The same mutation restricted to list columns, against the shadow table (lists as maps)."""
    table = mutation.table
    names = {n for n, _, _ in list_columns(table)}
    if not names:
        return []
    target = qualified(table.keyspace, shadow_table_name(table))
    writes: list[Write] = []
    where_pk, pk_values = _key_where(table, mutation.key, None)
    if mutation.tombstone is not None:
        writes.append(
            Write(f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where_pk}", (mutation.tombstone, *pk_values))
        )
    for tombstone in mutation.ranges:
        condition, bounds = range_condition(table, tombstone.range)
        writes.append(
            Write(
                f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where_pk} AND {condition}",
                (tombstone.timestamp, *pk_values, *bounds),
            )
        )
    rows: list[tuple[tuple[Any, ...] | None, RowWrite]] = [(None, mutation.static), *mutation.rows.items()]
    for ck, row in rows:
        where, keys = _key_where(table, mutation.key, ck)
        if row.deletion is not None and ck is not None:
            writes.append(Write(f"DELETE FROM {target} USING TIMESTAMP ? WHERE {where}", (row.deletion, *keys)))
        for name, change in row.collections.items():
            if name not in names:
                continue
            if change.tombstone is not None:
                writes.append(
                    Write(f"DELETE {q(name)} FROM {target} USING TIMESTAMP ? WHERE {where}", (change.tombstone, *keys))
                )
            for key, cell in change.elements.items():
                if cell.live:
                    writes.append(
                        Write(
                            f"UPDATE {target} USING TIMESTAMP ? AND TTL ? SET {q(name)} = {q(name)} + ? WHERE {where}",
                            (cell.timestamp, _ttl(cell), FrozenDict({key: cell.value}), *keys),
                        )
                    )
                else:
                    writes.append(
                        Write(
                            f"DELETE {q(name)}[?] FROM {target} USING TIMESTAMP ? WHERE {where}",
                            (key, cell.timestamp, *keys),
                        )
                    )
    return writes


def log_write(
    table: TableSchema,
    stream: StreamId,
    time: uuid.UUID,
    seq: int,
    end_of_batch: bool,
    row: PendingRow,
    timestamp: int,
) -> Write:
    """One log row: an UPDATE (no row marker: the row exists through its cells), every cell with
    the record's timestamp and the CDC TTL."""
    items: list[tuple[str, Any]] = [(log_schema.OPERATION, int(row.operation))]
    if row.ttl is not None:
        items.append((log_schema.TTL, row.ttl))
    if end_of_batch:
        items.append((log_schema.END_OF_BATCH, True))
    items += sorted(row.values.items())
    assignments = ", ".join(f"{q(name)} = ?" for name, _ in items)
    return Write(
        f"UPDATE {qualified(table.keyspace, table.log_table_name)} USING TIMESTAMP ? AND TTL ? SET {assignments}"
        f" WHERE {q(log_schema.STREAM_ID)} = ? AND {q(log_schema.TIME)} = ? AND {q(log_schema.BATCH_SEQ_NO)} = ?",
        (timestamp, table.cdc.ttl, *(v for _, v in items), stream.raw, time, seq),
        stream.raw,
    )
