"""Reads base rows before a write, as ScyllaDB does for pre- and post-images, and list element keys
from the shadow table (Cassandra's CQL shows lists without their keys)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from bridge.scylla.schema import Column, ColumnKind, TableSchema
from bridge_devstack.sim.executor import Executor
from bridge_devstack.sim.render import list_columns, q, qualified, shadow_table_name
from bridge_devstack.sim.state import PartitionState, row_from_read, working_value
from bridge_devstack.sim.values import canonical

RowKey = tuple[Any, ...] | None  # a clustering key, or None for the static row


class StateReader:
    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._lists: dict[tuple[str, str, tuple[Any, ...], RowKey], dict[str, dict[uuid.UUID, Any]]] = {}

    def reset(self) -> None:
        """Forget list keys read for the previous statement."""
        self._lists.clear()

    def _select(
        self, table: TableSchema, target: str, names: Sequence[str], pk: tuple[Any, ...], cks: Sequence[tuple[Any, ...]]
    ) -> list[dict[str, Any]]:
        """Rows of one partition as {column: value}: the clustered rows `cks`, or with `cks` empty
        the first row (enough for static columns, and the only row of a table without clustering
        key)."""
        selected = [c.name for c in table.clustering_key] + list(names)
        if not selected:
            selected = [c.name for c in table.partition_key]
        where = " AND ".join(f"{q(c.name)} = ?" for c in table.partition_key)
        cql = f"SELECT {', '.join(q(n) for n in selected)} FROM {target} WHERE {where}"
        clustering = table.clustering_key
        if not cks:
            rows = self.executor.query(cql + " LIMIT 1", pk)
        elif len(clustering) == 1:
            rows = self.executor.query(f"{cql} AND {q(clustering[0].name)} IN ?", (*pk, [ck[0] for ck in cks]))
        else:
            columns = ", ".join(q(c.name) for c in clustering)
            rows = self.executor.query(f"{cql} AND ({columns}) IN ?", (*pk, [tuple(ck) for ck in cks]))
        return [dict(zip(selected, row, strict=True)) for row in rows]

    def read(
        self, table: TableSchema, pk: tuple[Any, ...], cks: Sequence[tuple[Any, ...]], static: bool
    ) -> PartitionState:
        """The current state of the static row (if `static`) and of the clustered rows `cks`."""
        state = PartitionState()
        target = qualified(table.keyspace, table.name)
        regular = [c for c in table.value_columns if c.kind is ColumnKind.REGULAR]
        statics = [c for c in table.value_columns if c.kind is ColumnKind.STATIC]
        if static and statics:
            for values in self._select(table, target, [c.name for c in statics], pk, ()):
                state.static = row_from_read(values, statics)
                self._merge_lists(table, pk, None, state.static, statics)
        if (cks and regular) or not table.clustering_key:
            wanted = [] if not table.clustering_key else list(cks)
            for values in self._select(table, target, [c.name for c in regular], pk, wanted):
                ck = tuple(canonical(values[c.name]) for c in table.clustering_key)
                state.rows[ck] = row_from_read(values, regular)
                self._merge_lists(table, pk, ck, state.rows[ck], regular)
        elif cks:  # a table with only key columns: rows exist through their markers
            for values in self._select(table, target, [], pk, cks):
                state.rows[tuple(canonical(values[c.name]) for c in table.clustering_key)] = {}
        return state

    def _merge_lists(
        self, table: TableSchema, pk: tuple[Any, ...], ck: RowKey, row: dict[str, Any], columns: Sequence[Column]
    ) -> None:
        names = {c.name for c in columns if c.type.kind == "list" and not c.type.frozen}
        for name in names:
            row[name] = dict(self.lists(table, pk, ck, name)) or None

    def lists(self, table: TableSchema, pk: tuple[Any, ...], ck: RowKey, column: str) -> Mapping[uuid.UUID, Any]:
        """A list's elements by key, in key order, as the shadow table holds them."""
        key = (table.keyspace, table.name, pk, ck)
        if key not in self._lists:
            self._lists[key] = self._read_lists(table, pk, ck)
        return self._lists[key].get(column, {})

    def _read_lists(self, table: TableSchema, pk: tuple[Any, ...], ck: RowKey) -> dict[str, dict[uuid.UUID, Any]]:
        static = ck is None
        names = [n for n, _, is_static in list_columns(table) if is_static == static]
        if not names:
            return {}
        target = qualified(table.keyspace, shadow_table_name(table))
        rows = self._select(table, target, names, pk, [] if static or not table.clustering_key else [ck or ()])
        if not rows:
            return {}
        values = rows[0]
        return {name: working_value(canonical(values[name]), table.column(name).type) or {} for name in names}
