"""INSERT / UPDATE / DELETE / BATCH -> merged `PartitionMutation`s, one per (table, partition).

What each construct writes follows ScyllaDB (cdc-log-format.md 3.1, 3.3): an INSERT writes a row
marker; overwriting a non-frozen collection or UDT writes a collection tombstone at `T-1` plus the
new elements at `T` (the cells each assignment writes: `cell_writes.py`); a column `DELETE` of
one writes the tombstone at `T`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.scylla.schema import Column, ColumnKind, TableSchema
from bridge_devstack.sim import mutation as m
from bridge_devstack.sim.cell_writes import CellWriter, ListReader
from bridge_devstack.sim.collections import ListKeys
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.errors import InvalidRequestError
from bridge_devstack.sim.where import Selection, select

MAX_TTL = 20 * 365 * 24 * 3600



@dataclass(frozen=True, slots=True)
class TableInfo:
    """What the statement builder needs to know of a table besides its schema."""

    schema: TableSchema
    default_ttl: int = 0


class MutationBuilder:
    """Collects the mutations of one statement or batch, merged per (table, partition)."""

    def __init__(
        self,
        table_of: Callable[[ast.TableName], TableInfo],
        resolver: Resolver,
        default_timestamp: int,
        lists: ListReader,
        list_keys: ListKeys,
    ) -> None:
        self.table_of = table_of
        self.resolver = resolver
        self.default_timestamp = default_timestamp
        self.lists = lists
        self.list_keys = list_keys
        self.mutations: dict[tuple[str, str, tuple[Any, ...]], m.PartitionMutation] = {}
        self.cells = CellWriter(resolver, lists, list_keys)

    def add(self, statement: ast.Modification | ast.Batch) -> None:
        if isinstance(statement, ast.Batch):
            batch_ts = self._timestamp(statement.using, self.default_timestamp)
            for inner in statement.statements:
                if inner.using.timestamp is not None and statement.using.timestamp is not None:
                    raise InvalidRequestError("Timestamp must be set either on BATCH or individual statements")
                self._modification(inner, batch_ts)
        else:
            self._modification(statement, self.default_timestamp)

    def result(self) -> list[m.PartitionMutation]:
        return [mut for mut in self.mutations.values() if not mut.is_empty]

    # ------------------------------------------------------------ common

    def _timestamp(self, using: ast.Using, default: int) -> int:
        if using.timestamp is None:
            return default
        return self.resolver.integer(using.timestamp, "[timestamp]")

    def _ttl(self, using: ast.Using, info: TableInfo) -> int | None:
        if using.ttl is None:
            return info.default_ttl or None
        ttl = self.resolver.integer(using.ttl, "[ttl]")
        if ttl < 0:
            raise InvalidRequestError(f"A TTL must be greater or equal to 0, but was {ttl}")
        if ttl > MAX_TTL:
            raise InvalidRequestError(f"ttl is too large. requested ({ttl}) maximum ({MAX_TTL})")
        return ttl or None

    def _partition(self, table: TableSchema, key: tuple[Any, ...]) -> m.PartitionMutation:
        ident = (table.keyspace, table.name, key)
        if ident not in self.mutations:
            self.mutations[ident] = m.PartitionMutation(table, key)
        return self.mutations[ident]

    def _modification(self, statement: ast.Modification, default_ts: int) -> None:
        info = self.table_of(statement.table)
        timestamp = self._timestamp(statement.using, default_ts)
        if isinstance(statement, ast.Insert):
            self._insert(statement, info, timestamp)
        elif isinstance(statement, ast.Update):
            self._update(statement, info, timestamp)
        else:
            self._delete(statement, info, timestamp)

    @staticmethod
    def _column(table: TableSchema, name: str) -> Column:
        try:
            return table.column(name)
        except KeyError:
            raise InvalidRequestError(f"Undefined column name {name}") from None

    def _rows_for_write(
        self, table: TableSchema, selection: Selection, columns: list[Column]
    ) -> tuple[tuple[Any, ...], ...]:
        """Clustering keys an upsert or column delete writes to; () when only the static row is."""
        if not table.clustering_key:
            return ((),)
        if selection.ranges:
            raise InvalidRequestError(
                "Slice restrictions are not supported on the clustering columns of a write to specific columns"
            )
        if selection.is_full_rows:
            return selection.rows
        if all(c.kind is ColumnKind.STATIC for c in columns) and not selection.has_clustering:
            return ()
        names = ", ".join(c.name for c in table.clustering_key)
        raise InvalidRequestError(f"Some clustering keys are missing: {names}")

    # ------------------------------------------------------------ INSERT

    def _insert(self, statement: ast.Insert, info: TableInfo, timestamp: int) -> None:
        table = info.schema
        ttl = self._ttl(statement.using, info)
        given = dict(zip(statement.columns, statement.values, strict=True))
        for name in given:
            self._column(table, name)
        value_columns = [c for c in table.value_columns if c.name in given]
        only_static = bool(value_columns) and all(c.kind is ColumnKind.STATIC for c in value_columns)
        key_values: dict[str, Any] = {}
        for column in table.primary_key:
            if column.name not in given:
                if column.kind is ColumnKind.CLUSTERING and only_static:
                    continue
                raise InvalidRequestError(f"Some {_key_kind(column)} key parts are missing: {column.name}")
            value = self.resolver.value(given[column.name], column.type, column.name)
            if value is None:
                raise InvalidRequestError(f"Invalid null value in condition for column {column.name}")
            key_values[column.name] = value
        pk = tuple(key_values[c.name] for c in table.partition_key)
        mutation = self._partition(table, pk)
        has_ck = all(c.name in key_values for c in table.clustering_key)
        if has_ck:
            ck = tuple(key_values[c.name] for c in table.clustering_key)
            m.set_marker(mutation.row(ck), m.Cell(timestamp, ttl=ttl))
        for column in value_columns:
            if column.kind is not ColumnKind.STATIC and not has_ck:
                continue
            row = mutation.static if column.kind is ColumnKind.STATIC else mutation.row(ck)
            value = self.resolver.value(given[column.name], column.type, column.name)
            self.cells.overwrite(row, column, value, timestamp, ttl)

    # ------------------------------------------------------------ UPDATE

    def _update(self, statement: ast.Update, info: TableInfo, timestamp: int) -> None:
        table = info.schema
        ttl = self._ttl(statement.using, info)
        columns = [self._column(table, a.column) for a in statement.assignments]
        for column in columns:
            if column.is_key:
                raise InvalidRequestError(f"PRIMARY KEY part {column.name} found in SET part")
        selection = select(table, statement.where, self.resolver)
        _check_static_only("UPDATE", columns, selection)
        rows = self._rows_for_write(table, selection, columns)
        for pk in selection.partitions:
            mutation = self._partition(table, pk)
            for assignment, column in zip(statement.assignments, columns, strict=True):
                if column.kind is ColumnKind.STATIC:
                    self.cells.assign(mutation, None, assignment, column, timestamp, ttl)
                else:
                    for ck in rows:
                        self.cells.assign(mutation, ck, assignment, column, timestamp, ttl)

    # ------------------------------------------------------------ DELETE

    def _delete(self, statement: ast.Delete, info: TableInfo, timestamp: int) -> None:
        table = info.schema
        selection = select(table, statement.where, self.resolver)
        targets = [(t, self._column(table, t.column)) for t in statement.targets]
        for _, column in targets:
            if column.is_key:
                raise InvalidRequestError(
                    f"Invalid identifier {column.name} for deletion (should not be a PRIMARY KEY part)"
                )
        for pk in selection.partitions:
            mutation = self._partition(table, pk)
            if not targets:
                self._delete_rows(mutation, selection, timestamp)
                continue
            _check_static_only("DELETE", [c for _, c in targets], selection)
            if selection.ranges:
                raise InvalidRequestError("Range deletions are not supported for specific columns")
            regular = [c for _, c in targets if c.kind is not ColumnKind.STATIC]
            rows = self._rows_for_write(table, selection, regular) if regular else ()
            for target, column in targets:
                cks: tuple[tuple[Any, ...] | None, ...] = (None,) if column.kind is ColumnKind.STATIC else rows
                for ck in cks:
                    self._delete_target(mutation, ck, target, column, timestamp)

    def _delete_rows(self, mutation: m.PartitionMutation, selection: Selection, timestamp: int) -> None:
        if selection.is_full_rows and mutation.table.clustering_key:
            for ck in selection.rows:
                m.delete_row(mutation.row(ck), timestamp)
        elif selection.ranges:
            for rng in selection.ranges:
                mutation.delete_range(rng, timestamp)
        elif not selection.has_clustering:
            mutation.delete_partition(timestamp)

    def _delete_target(
        self,
        mutation: m.PartitionMutation,
        ck: tuple[Any, ...] | None,
        target: ast.DeleteTarget,
        column: Column,
        timestamp: int,
    ) -> None:
        row = mutation.static if ck is None else mutation.row(ck)
        dead = m.Cell(timestamp, live=False)
        if target.key is None and target.field is None:
            if column.type.is_multi_cell:
                m.delete_collection(row, column.name, timestamp)
            else:
                m.set_cell(row, column.name, dead, column.type)
            return
        if target.field is not None:
            names = list(column.type.field_names) if column.type.is_udt else []
            if target.field not in names or not column.type.is_multi_cell:
                raise InvalidRequestError(f"Invalid field deletion {column.name}.{target.field}")
            m.set_element(row, column.name, names.index(target.field), dead, None)
            return
        assert target.key is not None
        if column.type.kind == "map" and column.type.is_multi_cell:
            key = self.resolver.value(target.key, column.type.params[0], f"key({column.name})")
        elif column.type.kind == "list" and column.type.is_multi_cell:
            key = self.cells.list_key(mutation, ck, column, target.key)
        else:
            raise InvalidRequestError(f"Invalid deletion operation for non-map/non-list column {column.name}")
        m.set_element(row, column.name, key, dead, None)


def _check_static_only(kind: str, columns: list[Column], selection: Selection) -> None:
    if columns and all(c.kind is ColumnKind.STATIC for c in columns) and selection.has_clustering:
        raise InvalidRequestError(
            f"Invalid restrictions on clustering columns since the {kind} statement modifies only static columns"
        )


def _key_kind(column: Column) -> str:
    return "partition" if column.kind is ColumnKind.PARTITION_KEY else "clustering"
