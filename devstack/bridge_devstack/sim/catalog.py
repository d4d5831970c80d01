"""What the emulator knows of base tables: schemas from Cassandra's `system_schema`, CDC options
and keyspace modes from the emulator's metadata tables. Cached per process; DDL run through the
emulator invalidates the affected entries."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bridge.scylla.errors import SchemaError, TableMissingError
from bridge.scylla.schema import CqlType
from bridge.scylla.table_schema import load_table_schema, load_user_types
from bridge_devstack.sim.cdc_options import parse_cdc_options
from bridge_devstack.sim.errors import InvalidRequestError
from bridge_devstack.sim.metadata import MetadataStore
from bridge_devstack.sim.statements import TableInfo


@dataclass(frozen=True, slots=True)
class SimTable(TableInfo):
    """A base table: schema (with CDC options), default TTL, and whether it lives in a tablets
    keyspace (then it has its own stream sets)."""

    tablets: bool = False


class Catalog:
    def __init__(self, session: Any, metadata: MetadataStore) -> None:
        self.session = session
        self.metadata = metadata
        self._tables: dict[tuple[str, str], SimTable] = {}
        self._udts: dict[str, dict[str, CqlType]] = {}
        self._tablets: dict[str, int | None] = {}

    def invalidate(self, keyspace: str, table: str | None = None) -> None:
        if table is None:
            self._tables = {k: v for k, v in self._tables.items() if k[0] != keyspace}
            self._udts.pop(keyspace, None)
            self._tablets.pop(keyspace, None)
        else:
            self._tables.pop((keyspace, table), None)

    def keyspace_exists(self, keyspace: str) -> bool:
        row = self.session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
        ).one()
        return row is not None

    def table_exists(self, keyspace: str, table: str) -> bool:
        row = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        ).one()
        return row is not None

    def tablets(self, keyspace: str) -> int | None:
        if keyspace not in self._tablets:
            self._tablets[keyspace] = self.metadata.keyspace_tablets(keyspace)
        return self._tablets[keyspace]

    def udts(self, keyspace: str) -> dict[str, CqlType]:
        if keyspace not in self._udts:
            self._udts[keyspace] = self._load_udts(keyspace)
        return self._udts[keyspace]

    def _load_udts(self, keyspace: str) -> dict[str, CqlType]:
        try:
            return load_user_types(self.session, keyspace)
        except SchemaError as error:
            raise InvalidRequestError(str(error)) from None

    def table(self, keyspace: str, name: str) -> SimTable:
        key = (keyspace, name)
        if key not in self._tables:
            self._tables[key] = self._load_table(keyspace, name)
        return self._tables[key]

    def _load_table(self, keyspace: str, name: str) -> SimTable:
        try:
            schema = load_table_schema(self.session, keyspace, name)
        except TableMissingError:
            raise InvalidRequestError(f"unconfigured table {name}") from None
        except SchemaError as error:
            raise InvalidRequestError(str(error)) from None
        options_row = self.session.execute(
            "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, name),
        ).one()
        raw_cdc = self.metadata.table_cdc(keyspace, name)
        if raw_cdc is not None:
            schema = replace(schema, cdc=parse_cdc_options(raw_cdc))
        return SimTable(
            schema,
            default_ttl=options_row.default_time_to_live if options_row else 0,
            tablets=self.tablets(keyspace) is not None,
        )
