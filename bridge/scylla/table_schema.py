"""Table schemas from the cluster (`system_schema`, the same on ScyllaDB and Cassandra), and the
per-table cache the worker translates with.

A record whose log rows carry a column the cached schema does not know was written after an
`ALTER TABLE ... ADD`: the translator refuses it (`UnknownColumnError`), the worker reloads the
schema and translates it again, so the new column shows in its envelope and in every later one,
and earlier records keep their shape. A column still unknown after the reload stops the group
with an error naming it; nothing is dropped.
"""

from __future__ import annotations

from typing import Any

from bridge.scylla.errors import ErrorKind, SchemaError, TableMissingError, classify
from bridge.scylla.schema import (
    Column,
    ColumnKind,
    CqlType,
    CqlTypeError,
    TableSchema,
    parse_cql_type,
    quote_identifier,
    udt,
)

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
    return TableSchema(keyspace, table, tuple(column_of(r, types, f"{keyspace}.{table}") for r in rows))


def require_cdc_log(session: Any, keyspace: str, table: str) -> None:
    """The table's CDC log exists (CDC is on), or a `SchemaError` that says how to turn it on:
    reading a table without one would only wait for a log that never comes."""
    log_table = f"{table}_scylla_cdc_log"
    rows = list(session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, log_table),
    ))
    if not rows:
        raise SchemaError(f"table {keyspace}.{table} has no CDC log ({keyspace}.{log_table}): turn CDC on with "
                          f"ALTER TABLE {keyspace}.{table} WITH cdc = {{'enabled': true}}")


def load_cdc_options(session: Any, keyspace: str, table: str, tablets_keyspace: str) -> dict[str, str] | None:
    """The table's `cdc` options as ScyllaDB keeps them (`system_schema.scylla_tables.cdc`, a
    map<text, text> such as {'enabled': 'true', 'preimage': 'full', ...}; empty when CDC was never
    enabled), or None when the table does not exist. The emulator keeps its copy in
    `<tablets_keyspace>.scylla_tables` (Cassandra has no `system_schema.scylla_tables`): read in
    that order, as `SourceMetadata.cdc_ttl_s` reads the log TTL."""
    exists = list(session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    ))
    if not exists:
        return None
    for options_keyspace in ("system_schema", tablets_keyspace):
        query = (f"SELECT * FROM {quote_identifier(options_keyspace)}.scylla_tables "
                 "WHERE keyspace_name = %s AND table_name = %s")
        try:
            result = session.execute(query, (keyspace, table))
            names, rows = list(result.column_names or ()), list(result)
        except Exception as error:
            if classify(error) is ErrorKind.TRANSIENT:
                raise
            continue  # no such table here (Cassandra's system_schema, a cluster without the emulator)
        if rows and "cdc" in names:
            return {str(k): str(v) for k, v in (rows[0][names.index("cdc")] or {}).items()}
    return {}


def column_of(row: Any, types: dict[str, CqlType], table: str) -> Column:
    """One `system_schema.columns` row; a type the bridge cannot read is a `SchemaError` naming
    the table and column (start-up refuses the table; after an ALTER its groups fail visibly)."""
    try:
        cql_type = parse_cql_type(row.type, types)
    except CqlTypeError as error:
        raise SchemaError(f"{table}: column {row.column_name}: {error}") from None
    return Column(row.column_name, cql_type, _KINDS[row.kind], descending=row.clustering_order == "desc")


class TableSchemas:
    """The current schema of each table, loaded once and again on demand (after the translator
    met a log column the cached schema does not have)."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._schemas: dict[tuple[str, str], TableSchema] = {}

    def get(self, keyspace: str, table: str) -> TableSchema:
        schema = self._schemas.get((keyspace, table))
        return schema if schema is not None else self.reload(keyspace, table)

    def require_cdc_log(self, keyspace: str, table: str) -> None:
        require_cdc_log(self._session, keyspace, table)

    def reload(self, keyspace: str, table: str) -> TableSchema:
        schema = load_table_schema(self._session, keyspace, table)
        self._schemas[(keyspace, table)] = schema
        return schema
