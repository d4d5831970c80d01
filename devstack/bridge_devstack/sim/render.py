"""CQL text of the tables the emulator creates: base tables (as given, minus ScyllaDB-only options),
CDC log tables (cdc-log-format.md 1.2-1.4) and the list-key shadow tables. Pure code."""

from __future__ import annotations

import math
from collections.abc import Iterable

from bridge.scylla import log_schema
from bridge.scylla.schema import ColumnKind, CqlType, TableSchema, quote_identifier
from bridge_devstack.sim.cql import ast

LIST_SHADOW_SUFFIX = "_sim_lists"


q = quote_identifier  # short: it quotes every name of every statement rendered here


def qualified(keyspace: str, table: str) -> str:
    return f"{q(keyspace)}.{q(table)}"


def create_keyspace(statement: ast.CreateKeyspace, options: Iterable[ast.Option]) -> str:
    exists = " IF NOT EXISTS" if statement.if_not_exists else ""
    rendered = " AND ".join(f"{o.name} = {o.raw}" for o in options)
    return f"CREATE KEYSPACE{exists} {q(statement.name)} WITH {rendered}"


def create_type(keyspace: str, statement: ast.CreateType) -> str:
    exists = " IF NOT EXISTS" if statement.if_not_exists else ""
    fields = ", ".join(f"{q(name)} {type_text}" for name, type_text in statement.fields)
    return f"CREATE TYPE{exists} {qualified(keyspace, statement.name)} ({fields})"


def create_base_table(keyspace: str, statement: ast.CreateTable, options: Iterable[ast.Option]) -> str:
    exists = " IF NOT EXISTS" if statement.if_not_exists else ""
    columns = [f"{q(c.name)} {c.type_text}{' STATIC' if c.static else ''}" for c in statement.columns]
    partition = ", ".join(q(n) for n in statement.partition_key)
    key = ", ".join([f"({partition})"] + [q(n) for n in statement.clustering_key])
    clauses = [f"{o.name} = {o.raw}" for o in options]
    if statement.clustering_order:
        order = ", ".join(f"{q(n)} {d.upper()}" for n, d in statement.clustering_order)
        clauses.insert(0, f"CLUSTERING ORDER BY ({order})")
    with_clause = (" WITH " + " AND ".join(clauses)) if clauses else ""
    body = ", ".join([*columns, f"PRIMARY KEY ({key})"])
    return f"CREATE TABLE{exists} {qualified(keyspace, statement.table.name)} ({body}){with_clause}"


def log_table_properties(table: TableSchema) -> str:
    """ScyllaDB's defaults for a fresh log table that Cassandra accepts (no `tombstone_gc`, and
    caching without ScyllaDB's `enabled` key)."""
    ttl = table.cdc.ttl
    properties = [
        f"comment = 'CDC log for {table.keyspace}.{table.name}'",
        "caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}",
        "default_time_to_live = 0",
        "bloom_filter_fp_chance = 0.01",
        "speculative_retry = '99p'",
    ]
    if ttl > 0:
        window_seconds = math.ceil(ttl / 24)
        window_minutes = math.ceil(window_seconds / 60)
        check_seconds = max(1, window_seconds // 2)
        properties.append(
            "compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'MINUTES',"
            f" 'compaction_window_size': '{window_minutes}',"
            f" 'expired_sstable_check_frequency_seconds': '{check_seconds}'}}"
        )
        properties.append("gc_grace_seconds = 0")
    else:
        properties.append("compaction = {'class': 'TimeWindowCompactionStrategy'}")
    return " AND ".join(properties)


def create_log_table(table: TableSchema) -> str:
    columns = log_schema.log_columns(table)
    body = ", ".join(f"{q(name)} {cql_type.cql()}" for name, cql_type in columns.all)
    return (
        f"CREATE TABLE {qualified(table.keyspace, table.log_table_name)} ({body}, PRIMARY KEY"
        f" (({q(log_schema.STREAM_ID)}), {q(log_schema.TIME)}, {q(log_schema.BATCH_SEQ_NO)}))"
        f" WITH CLUSTERING ORDER BY ({q(log_schema.TIME)} ASC, {q(log_schema.BATCH_SEQ_NO)} ASC)"
        f" AND {log_table_properties(table)}"
    )


def log_columns_of(name: str, base_type: CqlType) -> list[tuple[str, CqlType]]:
    """The log columns one base value column brings: value, deleted flag, deleted elements."""
    result = [(name, log_schema.log_value_type(base_type)), (log_schema.deleted_column(name), CqlType("boolean"))]
    elements = log_schema.deleted_elements_type(base_type)
    if elements is not None:
        result.append((log_schema.deleted_elements_column(name), elements))
    return result


def alter_add(keyspace: str, table: str, columns: list[tuple[str, CqlType, bool]]) -> str:
    added = ", ".join(f"{q(n)} {t.cql()}{' STATIC' if static else ''}" for n, t, static in columns)
    return f"ALTER TABLE {qualified(keyspace, table)} ADD ({added})"


def alter_drop(keyspace: str, table: str, names: list[str]) -> str:
    return f"ALTER TABLE {qualified(keyspace, table)} DROP ({', '.join(q(n) for n in names)})"


def list_columns(table: TableSchema) -> list[tuple[str, CqlType, bool]]:
    """Non-frozen list columns as the shadow table holds them: `map<timeuuid, V>`, static kept."""
    return [
        (c.name, CqlType("map", (CqlType("timeuuid"), c.type.params[0])), c.kind is ColumnKind.STATIC)
        for c in table.value_columns
        if c.type.kind == "list" and not c.type.frozen
    ]


def shadow_table_name(table: TableSchema) -> str:
    return table.name + LIST_SHADOW_SUFFIX


def create_shadow_table(table: TableSchema) -> str:
    """The table that remembers each list element's timeuuid key (Cassandra's CQL cannot show
    them), with the base table's primary key."""
    keys = [f"{q(c.name)} {c.type.cql()}" for c in table.primary_key]
    lists = [f"{q(n)} {t.cql()}{' STATIC' if s else ''}" for n, t, s in list_columns(table)]
    partition = ", ".join(q(c.name) for c in table.partition_key)
    key = ", ".join([f"({partition})"] + [q(c.name) for c in table.clustering_key])
    order = ", ".join(f"{q(c.name)} {'DESC' if c.descending else 'ASC'}" for c in table.clustering_key)
    with_clause = f" WITH CLUSTERING ORDER BY ({order})" if order else ""
    return (
        f"CREATE TABLE IF NOT EXISTS {qualified(table.keyspace, shadow_table_name(table))}"
        f" ({', '.join(keys + lists)}, PRIMARY KEY ({key})){with_clause}"
    )
