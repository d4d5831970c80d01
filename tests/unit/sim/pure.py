"""Runs the emulator's pure pipeline (parse -> mutations -> log records) without Cassandra: tables
are declared with CQL, the base "database" is the `PartitionState` each write leaves behind."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bridge.scylla.schema import Column, ColumnKind, CqlType, TableSchema, parse_cql_type, udt
from bridge_devstack.sim.cdc_options import parse_cdc_options
from bridge_devstack.sim.changes import PendingRecord, compute_records
from bridge_devstack.sim.collections import ListKeys
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.cql.parser import parse_statement
from bridge_devstack.sim.mutation import PartitionMutation
from bridge_devstack.sim.state import PartitionState
from bridge_devstack.sim.statements import MutationBuilder, TableInfo

T = 1_700_000_000_000_000  # a fixed write timestamp (µs)
LIST_LOW_BITS = 0xAF55000000000001


def table_from_cql(create: str, udts: dict[str, CqlType] | None = None, keyspace: str = "ks") -> TableSchema:
    statement = parse_statement(create)
    assert isinstance(statement, ast.CreateTable)
    order = dict(statement.clustering_order)
    columns: list[Column] = []
    for name in statement.partition_key:
        columns.append(Column(name, _type(statement, name, udts), ColumnKind.PARTITION_KEY))
    for name in statement.clustering_key:
        columns.append(
            Column(name, _type(statement, name, udts), ColumnKind.CLUSTERING, descending=order.get(name) == "desc")
        )
    keys = set(statement.partition_key) | set(statement.clustering_key)
    for c in statement.columns:
        if c.name not in keys:
            kind = ColumnKind.STATIC if c.static else ColumnKind.REGULAR
            columns.append(Column(c.name, parse_cql_type(c.type_text, udts or {}), kind))
    schema = TableSchema(keyspace, statement.table.name, tuple(columns))
    cdc = [o for o in statement.options if o.name == "cdc"]
    if cdc:
        assert isinstance(cdc[0].value, ast.MapTerm)
        raw = {k.text: v.text for k, v in cdc[0].value.entries}  # type: ignore[union-attr]
        schema = replace(schema, cdc=parse_cdc_options(raw))
    return schema


def _type(statement: ast.CreateTable, name: str, udts: dict[str, CqlType] | None) -> CqlType:
    text = next(c.type_text for c in statement.columns if c.name == name)
    return parse_cql_type(text, udts or {})


UT = udt("ut", [("a", CqlType("int")), ("b", CqlType("int")), ("c", CqlType("int"))])


@dataclass
class World:
    """Tables and their partitions' states; `write` returns the records of one statement."""

    tables: dict[str, TableSchema] = field(default_factory=dict)
    states: dict[tuple[str, tuple[Any, ...]], PartitionState] = field(default_factory=dict)
    default_ttls: dict[str, int] = field(default_factory=dict)

    def add(self, create: str, udts: dict[str, CqlType] | None = None) -> TableSchema:
        schema = table_from_cql(create, udts)
        self.tables[schema.name] = schema
        return schema

    def mutations(self, cql: str, timestamp: int = T, params: tuple[Any, ...] = ()) -> list[PartitionMutation]:
        builder = MutationBuilder(
            lambda name: TableInfo(self.tables[name.name], self.default_ttls.get(name.name, 0)),
            Resolver(params, lambda: timestamp),
            timestamp,
            self._list,
            ListKeys(LIST_LOW_BITS),
        )
        statement = parse_statement(cql)
        assert isinstance(statement, ast.Insert | ast.Update | ast.Delete | ast.Batch)
        builder.add(statement)
        return builder.result()

    def _list(self, table: TableSchema, pk: tuple[Any, ...], ck: tuple[Any, ...] | None, column: str) -> Any:
        state = self.states.get((table.name, pk), PartitionState())
        row = state.static if ck is None else state.rows.get(ck)
        return (row or {}).get(column) or {}

    def write(self, cql: str, timestamp: int = T, params: tuple[Any, ...] = ()) -> list[PendingRecord]:
        records: list[PendingRecord] = []
        for mutation in self.mutations(cql, timestamp, params):
            state = self.states.setdefault((mutation.table.name, mutation.key), PartitionState())
            records += compute_records(mutation, state)
        return records


def rows(record: PendingRecord) -> list[tuple[int, int | None, dict[str, Any]]]:
    """A record as (operation, ttl, values) per row."""
    return [(int(r.operation), r.ttl, r.values) for r in record.rows]
