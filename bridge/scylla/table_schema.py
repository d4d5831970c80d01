"""Table schemas from the cluster (`system_schema`, the same on ScyllaDB and Cassandra), and the
per-table cache the worker translates with.

A record whose log rows carry a column the cached schema does not know was written after an
`ALTER TABLE ... ADD`: the schema is loaded again before that record is translated, so the new
column shows in its envelope and in every later one, and earlier records keep their shape. A
column that is still unknown after the reload is reported by name, never dropped.
"""

from __future__ import annotations

from typing import Any

from bridge.scylla.errors import SchemaError, TableMissingError
from bridge.scylla.log_schema import log_columns
from bridge.scylla.model import ChangeRecord
from bridge.scylla.schema import Column, ColumnKind, CqlType, TableSchema, parse_cql_type, udt

_KINDS = {
    "partition_key": ColumnKind.PARTITION_KEY,
    "clustering": ColumnKind.CLUSTERING,
    "static": ColumnKind.STATIC,
    "regular": ColumnKind.REGULAR,
}
_KIND_ORDER = {"partition_key": 0, "clustering": 1, "static": 2, "regular": 2}


def load_user_types(session: Any, keyspace: str) -> dict[str, CqlType]:
    """The keyspace's UDTs, resolved in dependency order (a UDT may use another)."""
    rows = list(session.execute(
        "SELECT type_name, field_names, field_types FROM system_schema.types WHERE keyspace_name = %s",
        (keyspace,),
    ))
    resolved: dict[str, CqlType] = {}
    pending = {row.type_name: row for row in rows}
    while pending:
        progress = False
        for name, row in list(pending.items()):
            try:
                field_types = [parse_cql_type(t, resolved) for t in row.field_types]
            except ValueError:
                continue
            resolved[name] = udt(name, list(zip(row.field_names, field_types, strict=True)))
            del pending[name]
            progress = True
        if not progress:
            raise SchemaError(f"cannot resolve user types {sorted(pending)} of keyspace {keyspace}")
    return resolved


def load_table_schema(session: Any, keyspace: str, table: str) -> TableSchema:
    """Raises TableMissingError when the table does not exist."""
    rows = list(session.execute(
        "SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns"
        " WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    ))
    if not rows:
        raise TableMissingError(f"table {keyspace}.{table} does not exist")
    types = load_user_types(session, keyspace)
    rows.sort(key=lambda r: (_KIND_ORDER[r.kind], r.position if _KIND_ORDER[r.kind] < 2 else 0, r.column_name))
    columns = tuple(
        Column(r.column_name, parse_cql_type(r.type, types), _KINDS[r.kind], descending=r.clustering_order == "desc")
        for r in rows
    )
    return TableSchema(keyspace, table, columns)


class TableSchemas:
    """The schema to translate each record with, reloaded when a record shows a new column."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._schemas: dict[tuple[str, str], tuple[TableSchema, frozenset[str]]] = {}

    def get(self, keyspace: str, table: str) -> TableSchema:
        return self._entry(keyspace, table)[0]

    def for_record(self, record: ChangeRecord) -> TableSchema:
        schema, known = self._entry(record.keyspace, record.table)
        if all(row.values.keys() <= known for row in record.rows):
            return schema
        schema, known = self._load(record.keyspace, record.table)
        for row in record.rows:
            unknown = row.values.keys() - known
            if unknown:
                raise SchemaError(
                    f"log column {sorted(unknown)[0]!r} of {record.keyspace}.{record.table} is not in the table's"
                    f" schema (stream {record.stream_id}, cdc$time {record.time}, seq {row.batch_seq_no})"
                )
        return schema

    def _entry(self, keyspace: str, table: str) -> tuple[TableSchema, frozenset[str]]:
        entry = self._schemas.get((keyspace, table))
        return entry if entry is not None else self._load(keyspace, table)

    def _load(self, keyspace: str, table: str) -> tuple[TableSchema, frozenset[str]]:
        schema = load_table_schema(self._session, keyspace, table)
        known = frozenset(name for name, _ in log_columns(schema).all)
        self._schemas[(keyspace, table)] = (schema, known)
        return schema, known
