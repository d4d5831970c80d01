"""INSERT / UPDATE / DELETE / BATCH -> merged `PartitionMutation`s, one per (table, partition).

What each construct writes follows ScyllaDB (cdc-log-format.md 3.1, 3.3): an INSERT writes a row
marker; overwriting a non-frozen collection or UDT writes a collection tombstone at `T-1` plus the
new elements at `T`; a column `DELETE` of one writes the tombstone at `T`; list appends and
prepends get fresh timeuuid keys; list operations by index or by value read the list first (the
`ListReader` the caller supplies).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bridge.scylla.schema import Column, ColumnKind, CqlType, TableSchema, scalar
from bridge.sim import mutation as m
from bridge.sim.collections import ListKeys, element_type
from bridge.sim.cql import ast
from bridge.sim.cql.literals import Resolver
from bridge.sim.errors import InvalidRequestError, UnsupportedCqlError
from bridge.sim.values import sorted_values
from bridge.sim.where import Selection, select

MAX_TTL = 20 * 365 * 24 * 3600

# (table, partition key, clustering key or None for the static row, column) -> {key: value}
ListReader = Callable[[TableSchema, tuple[Any, ...], tuple[Any, ...] | None, str], Mapping[Any, Any]]


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
            self._overwrite(row, column, value, timestamp, ttl)

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
                    self._assign(mutation, None, assignment, column, timestamp, ttl)
                else:
                    for ck in rows:
                        self._assign(mutation, ck, assignment, column, timestamp, ttl)

    def _assign(
        self,
        mutation: m.PartitionMutation,
        ck: tuple[Any, ...] | None,
        assignment: ast.Assignment,
        column: Column,
        timestamp: int,
        ttl: int | None,
    ) -> None:
        row = mutation.static if ck is None else mutation.row(ck)
        kind, op = column.type.kind, assignment.op
        if kind == "counter":
            raise UnsupportedCqlError(
                f"counter column {column.name}: counter updates (tables without CDC) are not emulated"
            )
        if op == "=":
            value = self.resolver.value(assignment.value, column.type, column.name)
            self._overwrite(row, column, value, timestamp, ttl)
            return
        if not column.type.is_multi_cell:
            raise InvalidRequestError(f"Invalid operation ({op}) for non counter column {column.name}")
        if op == "field":
            self._set_field(row, column, assignment, timestamp, ttl)
        elif op == "element":
            self._set_element(mutation, ck, row, column, assignment, timestamp, ttl)
        elif op in ("+", "prepend"):
            if op == "prepend" and kind != "list":
                raise InvalidRequestError(f"Invalid operation (prepend) for non list column {column.name}")
            value = self.resolver.value(assignment.value, column.type, column.name)
            self._add_elements(row, column, value, timestamp, ttl, prepend=op == "prepend")
        else:
            self._remove_elements(mutation, ck, row, column, assignment, timestamp)

    def _overwrite(self, row: m.RowWrite, column: Column, value: Any, timestamp: int, ttl: int | None) -> None:
        if not column.type.is_multi_cell:
            cell = m.Cell(timestamp, ttl=ttl, value=value) if value is not None else m.Cell(timestamp, live=False)
            m.set_cell(row, column.name, cell, column.type)
            return
        # Overwriting a collection or UDT deletes the old one just before writing the new elements.
        m.delete_collection(row, column.name, timestamp - 1)
        if value is not None:
            self._add_elements(row, column, value, timestamp, ttl, prepend=False)

    def _add_elements(
        self, row: m.RowWrite, column: Column, value: Any, timestamp: int, ttl: int | None, *, prepend: bool
    ) -> None:
        kind = column.type.kind
        if value is None:
            raise InvalidRequestError(f"Invalid null value for {column.name}")
        vtype = element_type(column.type)
        if kind == "map":
            items: list[tuple[Any, Any]] = list(value.items())
        elif kind == "set":
            items = [(element, None) for element in value]
        elif kind == "list":
            keys = (
                self.list_keys.prepend(timestamp, len(value))
                if prepend
                else self.list_keys.append(timestamp, len(value))
            )
            items = list(zip(keys, value, strict=True))
        else:  # UDT: null fields are simply not written
            items = [(i, v) for i, v in enumerate(value) if v is not None]
        for key, element in items:
            if kind != "set" and element is None:
                raise InvalidRequestError(f"null is not supported inside collections ({column.name})")
            m.set_element(row, column.name, key, m.Cell(timestamp, ttl=ttl, value=element), vtype)
        if kind == "udt" and not items:
            row.collections.setdefault(column.name, m.CollectionWrite())

    def _set_field(
        self, row: m.RowWrite, column: Column, assignment: ast.Assignment, timestamp: int, ttl: int | None
    ) -> None:
        if not column.type.is_udt:
            raise InvalidRequestError(f"Invalid field selection: {column.name} of type {column.type} is not a UDT")
        names = list(column.type.field_names)
        if assignment.field not in names:
            raise InvalidRequestError(f"UDT column {column.name} does not have a field named {assignment.field}")
        index = names.index(assignment.field)
        value = self.resolver.value(assignment.value, column.type.params[index], f"{column.name}.{assignment.field}")
        cell = m.Cell(timestamp, ttl=ttl, value=value) if value is not None else m.Cell(timestamp, live=False)
        m.set_element(row, column.name, index, cell, column.type.params[index])

    def _set_element(
        self,
        mutation: m.PartitionMutation,
        ck: tuple[Any, ...] | None,
        row: m.RowWrite,
        column: Column,
        assignment: ast.Assignment,
        timestamp: int,
        ttl: int | None,
    ) -> None:
        kind = column.type.kind
        assert assignment.key is not None
        if kind == "map":
            key = self.resolver.value(assignment.key, column.type.params[0], f"key({column.name})")
        elif kind == "list":
            key = self._list_key(mutation, ck, column, assignment.key)
        else:
            raise InvalidRequestError(f"Invalid operation ({column.name}[...] = ...) for non list/map column")
        vtype = element_type(column.type)
        assert vtype is not None  # maps and lists have element types
        value = self.resolver.value(assignment.value, vtype, f"value({column.name})")
        cell = m.Cell(timestamp, ttl=ttl, value=value) if value is not None else m.Cell(timestamp, live=False)
        m.set_element(row, column.name, key, cell, vtype)

    def _list_key(
        self, mutation: m.PartitionMutation, ck: tuple[Any, ...] | None, column: Column, key_term: ast.Term
    ) -> Any:
        if isinstance(key_term, ast.FunctionCall) and key_term.name == "scylla_timeuuid_list_index":
            if len(key_term.args) != 1:
                raise InvalidRequestError("SCYLLA_TIMEUUID_LIST_INDEX takes one timeuuid")
            return self.resolver.value(key_term.args[0], scalar("timeuuid"), f"idx({column.name})")
        index = self.resolver.value(key_term, scalar("int"), f"idx({column.name})")
        if index is None:
            raise InvalidRequestError(f"Invalid null value for list index of {column.name}")
        current = sorted_values(self.lists(mutation.table, mutation.key, ck, column.name), scalar("timeuuid"))
        if not 0 <= index < len(current):
            raise InvalidRequestError(f"List index {index} out of bound, list has size {len(current)}")
        return current[index]

    def _remove_elements(
        self,
        mutation: m.PartitionMutation,
        ck: tuple[Any, ...] | None,
        row: m.RowWrite,
        column: Column,
        assignment: ast.Assignment,
        timestamp: int,
    ) -> None:
        kind = column.type.kind
        if kind == "map":
            keys = self.resolver.value(assignment.value, CqlType("set", (column.type.params[0],)), column.name)
        elif kind == "set":
            keys = self.resolver.value(assignment.value, column.type, column.name)
        elif kind == "list":
            doomed = set(self.resolver.value(assignment.value, column.type, column.name) or ())
            current = self.lists(mutation.table, mutation.key, ck, column.name)
            keys = [k for k, v in current.items() if v in doomed]
        else:
            raise InvalidRequestError(f"Invalid operation (-) for UDT column {column.name}")
        for key in keys or ():
            m.set_element(row, column.name, key, m.Cell(timestamp, live=False), None)

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
            key = self._list_key(mutation, ck, column, target.key)
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
