"""The cells one assignment writes into a row, as ScyllaDB writes them (cdc-log-format.md 3.1,
3.3): overwriting a non-frozen collection or UDT writes a collection tombstone at `T-1` plus the
new elements at `T`; list appends and prepends get fresh timeuuid keys; list operations by index
or by value read the list first (the `ListReader` the caller supplies); a UDT field or a map or
set element is one cell."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bridge.scylla.schema import Column, CqlType, TableSchema, scalar
from bridge_devstack.sim import mutation as m
from bridge_devstack.sim.collections import ListKeys, element_type
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.errors import InvalidRequestError, UnsupportedCqlError
from bridge_devstack.sim.values import sorted_values

# (table, partition key, clustering key or None for the static row, column) -> {key: value}
ListReader = Callable[[TableSchema, tuple[Any, ...], tuple[Any, ...] | None, str], Mapping[Any, Any]]


class CellWriter:
    def __init__(self, resolver: Resolver, lists: ListReader, list_keys: ListKeys) -> None:
        self.resolver = resolver
        self.lists = lists
        self.list_keys = list_keys

    def assign(
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
            self.overwrite(row, column, value, timestamp, ttl)
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

    def overwrite(self, row: m.RowWrite, column: Column, value: Any, timestamp: int, ttl: int | None) -> None:
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
            key = self.list_key(mutation, ck, column, assignment.key)
        else:
            raise InvalidRequestError(f"Invalid operation ({column.name}[...] = ...) for non list/map column")
        vtype = element_type(column.type)
        assert vtype is not None  # maps and lists have element types
        value = self.resolver.value(assignment.value, vtype, f"value({column.name})")
        cell = m.Cell(timestamp, ttl=ttl, value=value) if value is not None else m.Cell(timestamp, live=False)
        m.set_element(row, column.name, key, cell, vtype)

    def list_key(
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
