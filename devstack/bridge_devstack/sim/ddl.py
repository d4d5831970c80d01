"""Schema statements: run on Cassandra without ScyllaDB-only options, with the CDC log table (and
the list-key shadow table) kept in step, and CDC options and keyspace modes recorded in the
emulator's metadata (cdc-log-format.md 1.1, 1.5)."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from datetime import UTC
from typing import Any

from bridge.scylla.log_schema import log_columns
from bridge.scylla.schema import CdcOptions, CqlType, CqlTypeError, TableSchema, parse_cql_type
from bridge_devstack.sim import render
from bridge_devstack.sim.catalog import Catalog, SimTable
from bridge_devstack.sim.cdc_options import cdc_extension_bytes, describe_cdc_options, parse_cdc_options
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.errors import InvalidRequestError, UnsupportedCqlError
from bridge_devstack.sim.metadata import MetadataStore
from bridge_devstack.sim.router import StreamRouter

CDC_PARTITIONER = "com.scylladb.dht.CDCPartitioner"
LOG_SUFFIX = "_scylla_cdc_log"
# ScyllaDB drops a CDC log table's columns with a timestamp this far ahead (so that log writes
# racing the drop stay older than it), and refuses to re-add a column of that name until then.
LOG_COLUMN_DROP_AHEAD_S = 5.0


def _option_map(option: ast.Option) -> dict[str, str]:
    if not isinstance(option.value, ast.MapTerm):
        raise InvalidRequestError(f"option {option.name} must be a map, got {option.raw}")
    result: dict[str, str] = {}
    for key, value in option.value.entries:
        if not isinstance(key, ast.Literal) or not isinstance(value, ast.Literal):
            raise InvalidRequestError(f"option {option.name} must map constants to constants: {option.raw}")
        result[key.text] = value.text
    return result


def _split_options(options: tuple[ast.Option, ...], name: str) -> tuple[ast.Option | None, list[ast.Option]]:
    chosen = [o for o in options if o.name == name]
    return (chosen[0] if chosen else None), [o for o in options if o.name != name]


class SchemaEditor:
    def __init__(
        self, session: Any, catalog: Catalog, metadata: MetadataStore, router: StreamRouter, initial_tablets: int
    ) -> None:
        self.session = session
        self.catalog = catalog
        self.metadata = metadata
        self.router = router
        self.initial_tablets = initial_tablets

    # ------------------------------------------------------------ keyspaces and types

    def create_keyspace(self, statement: ast.CreateKeyspace) -> None:
        tablets_option, options = _split_options(statement.options, "tablets")
        tablets: int | None = None
        if tablets_option is not None:
            raw = {k.lower(): v.lower() for k, v in _option_map(tablets_option).items()}
            if raw.get("enabled", "true") in ("true", "1"):
                tablets = int(raw.get("initial", self.initial_tablets) or self.initial_tablets)
                if tablets < 1 or tablets & (tablets - 1):
                    raise InvalidRequestError(f"tablets 'initial' must be a power of 2, got {tablets}")
        existed = self.catalog.keyspace_exists(statement.name)
        self.session.execute(render.create_keyspace(statement, options))
        if not existed:
            self.metadata.set_keyspace_tablets(statement.name, tablets)
        self.catalog.invalidate(statement.name)

    def create_type(self, keyspace: str, statement: ast.CreateType) -> None:
        self.session.execute(render.create_type(keyspace, statement))
        self.catalog.invalidate(keyspace)

    def drop(self, statement: ast.Drop, keyspace: str) -> None:
        if statement.what == "keyspace":
            self.session.execute(f"DROP KEYSPACE{' IF EXISTS' if statement.if_exists else ''} {render.q(keyspace)}")
            self.metadata.forget_keyspace(keyspace)
            self.catalog.invalidate(keyspace)
            return
        exists = " IF EXISTS" if statement.if_exists else ""
        if statement.what == "type":
            self.session.execute(f"DROP TYPE{exists} {render.qualified(keyspace, statement.name)}")
            self.catalog.invalidate(keyspace)
            return
        if not self.catalog.table_exists(keyspace, statement.name) and statement.if_exists:
            return
        table = self.catalog.table(keyspace, statement.name).schema
        self.session.execute(f"DROP TABLE{exists} {render.qualified(keyspace, statement.name)}")
        for extra in (table.log_table_name, render.shadow_table_name(table)):
            self.session.execute(f"DROP TABLE IF EXISTS {render.qualified(keyspace, extra)}")
        self.metadata.forget_table(keyspace, statement.name)
        self.catalog.invalidate(keyspace, statement.name)

    def pass_through(self, statement: ast.PassThrough, keyspace: str | None) -> None:
        """ALTER TYPE / ALTER KEYSPACE / SELECT go to Cassandra unchanged; a keyspace's tablets mode
        cannot change after creation here."""
        if statement.type_name is None and "tablets" in statement.text.lower():
            raise UnsupportedCqlError("changing the tablets option of an existing keyspace")
        self.session.execute(statement.text)
        if keyspace:
            self.catalog.invalidate(keyspace)

    def truncate(self, table: SimTable) -> None:
        schema = table.schema
        self.session.execute(f"TRUNCATE {render.qualified(schema.keyspace, schema.name)}")
        if render.list_columns(schema):
            self.session.execute(f"TRUNCATE {render.qualified(schema.keyspace, render.shadow_table_name(schema))}")

    # ------------------------------------------------------------ tables

    def create_table(self, keyspace: str, statement: ast.CreateTable) -> None:
        name = statement.table.name
        cdc_option, options = _split_options(statement.options, "cdc")
        cdc = parse_cdc_options(_option_map(cdc_option)) if cdc_option else CdcOptions()
        types = self._column_types(keyspace, statement.columns)
        if cdc.enabled:
            self._check_cdc_allowed(keyspace, name, types)
        if statement.if_not_exists and self.catalog.table_exists(keyspace, name):
            return
        if cdc.enabled and not self.catalog.table_exists(keyspace, name):
            self._check_log_name_free(keyspace, name)
        self.session.execute(render.create_base_table(keyspace, statement, options))
        self.catalog.invalidate(keyspace, name)
        self._set_cdc(keyspace, name, cdc)

    def _column_types(self, keyspace: str, columns: tuple[ast.ColumnDef, ...]) -> dict[str, CqlType]:
        udts = self.catalog.udts(keyspace)
        types: dict[str, CqlType] = {}
        for column in columns:
            try:
                types[column.name] = parse_cql_type(column.type_text, udts)
            except CqlTypeError as exc:
                raise InvalidRequestError(f"column {column.name}: {exc}") from None
        return types

    def _check_cdc_allowed(self, keyspace: str, name: str, types: dict[str, CqlType]) -> None:
        if name.endswith(LOG_SUFFIX):
            raise InvalidRequestError(
                f"Cannot create a CDC log for a table {keyspace}.{name}, because creating nested CDC logs is not"
                " allowed"
            )
        if any(t.kind == "counter" for t in types.values()):
            raise InvalidRequestError(
                f"Cannot create CDC log for table {keyspace}.{name}. Counter support not implemented"
            )

    def _check_log_name_free(self, keyspace: str, name: str) -> None:
        """ScyllaDB creates the log with the table, or neither: a table already holding the log's
        name refuses the CREATE before anything exists."""
        if self.catalog.table_exists(keyspace, name + LOG_SUFFIX):
            raise InvalidRequestError(
                f"Cannot create CDC log table for table {keyspace}.{name} because a table of name"
                f" {keyspace}.{name}{LOG_SUFFIX} already exists"
            )

    def _is_cdc_log(self, keyspace: str, name: str) -> bool:
        """ScyllaDB's `is_log_for_some_table`: the log table of a base table with CDC enabled."""
        if not name.endswith(LOG_SUFFIX):
            return False
        base = name[: -len(LOG_SUFFIX)]
        return self.catalog.table_exists(keyspace, base) and self.catalog.table(keyspace, base).schema.cdc.enabled

    def alter_table(self, table: SimTable, statement: ast.AlterTable) -> None:
        schema = table.schema
        keyspace, name = schema.keyspace, schema.name
        if (statement.add or statement.drop) and self._is_cdc_log(keyspace, name):
            raise InvalidRequestError(
                "You cannot modify the set of columns of a CDC log table directly. Modify the base table instead."
            )
        if statement.add or statement.drop:
            self._alter_columns(table, statement)
        if statement.options:
            cdc_option, options = _split_options(statement.options, "cdc")
            if options:
                clauses = " AND ".join(f"{o.name} = {o.raw}" for o in options)
                self.session.execute(f"ALTER TABLE {render.qualified(keyspace, name)} WITH {clauses}")
            if cdc_option is not None:
                cdc = parse_cdc_options(_option_map(cdc_option))
                if cdc.enabled:
                    self._check_cdc_allowed(keyspace, name, {c.name: c.type for c in schema.columns})
                self._set_cdc(keyspace, name, cdc)
        self._write_cdc_extension(keyspace, name)
        self.catalog.invalidate(keyspace, name)

    def _alter_columns(self, table: SimTable, statement: ast.AlterTable) -> None:
        schema = table.schema
        keyspace = schema.keyspace
        log_exists = self.catalog.table_exists(keyspace, schema.log_table_name)
        base = render.qualified(keyspace, schema.name)
        if statement.add:
            types = self._column_types(keyspace, statement.add)
            self._check_addable(table, types, log_exists)
            added = ", ".join(f"{render.q(c.name)} {c.type_text}{' STATIC' if c.static else ''}" for c in statement.add)
            self.session.execute(f"ALTER TABLE {base} ADD ({added})")
            if log_exists:
                log_added = [
                    (n, t, False) for c in statement.add for n, t in render.log_columns_of(c.name, types[c.name])
                ]
                self.session.execute(render.alter_add(keyspace, schema.log_table_name, log_added))
            lists = [
                (c.name, CqlType("map", (CqlType("timeuuid"), types[c.name].params[0])), c.static)
                for c in statement.add
                if types[c.name].kind == "list" and not types[c.name].frozen
            ]
            if lists:
                self._ensure_shadow(table, lists)
        if statement.drop:
            known = {c.name: c for c in schema.value_columns}
            missing = [n for n in statement.drop if n not in known]
            if missing:
                raise InvalidRequestError(f"Column {missing[0]} was not found in table {schema.name}")
            columns = [known[n] for n in statement.drop]
            self.session.execute(render.alter_drop(keyspace, schema.name, list(statement.drop)))
            if log_exists:
                dropped = [n for c in columns for n, _ in render.log_columns_of(c.name, c.type)]
                ahead_us = int((time.time() + LOG_COLUMN_DROP_AHEAD_S) * 1_000_000)
                self.session.execute(
                    render.alter_drop(keyspace, schema.log_table_name, dropped) + f" USING TIMESTAMP {ahead_us}"
                )
            dropped_lists = [c.name for c in columns if c.type.kind == "list" and not c.type.frozen]
            if dropped_lists:
                self.session.execute(render.alter_drop(keyspace, render.shadow_table_name(schema), dropped_lists))

    def _check_addable(self, table: SimTable, types: dict[str, CqlType], log_exists: bool) -> None:
        """ScyllaDB's refusals of ALTER TABLE ... ADD, before anything changes: counter and
        non-counter columns do not mix, and a column whose log columns were dropped moments
        ago (their drop time lies ahead, `LOG_COLUMN_DROP_AHEAD_S`) cannot come back yet."""
        schema = table.schema
        counter_table = any(c.type.kind == "counter" for c in schema.value_columns)
        for name, cql_type in types.items():
            if cql_type.kind == "counter" and not counter_table:
                raise InvalidRequestError(f"Cannot add a counter column ({name}) in a non counter column family")
            if cql_type.kind != "counter" and counter_table:
                raise InvalidRequestError(f"Cannot add a non counter column ({name}) in a counter column family")
        if not log_exists:
            return
        rows = self.session.execute(
            "SELECT column_name, dropped_time FROM system_schema.dropped_columns"
            " WHERE keyspace_name = %s AND table_name = %s",
            (schema.keyspace, schema.log_table_name),
        )
        # the driver's timestamps are naive UTC
        drop_ms = {r.column_name: r.dropped_time.replace(tzinfo=UTC).timestamp() * 1000 for r in rows}
        now_ms = time.time() * 1000
        for name in types:
            ahead_ms = drop_ms.get(name, 0.0) - now_ms
            if ahead_ms > 0:
                raise InvalidRequestError(
                    f"Cannot add column {name} because a column with the same name was dropped too recently."
                    f" Please retry after {math.ceil(ahead_ms / 1000)} seconds"
                )

    def _ensure_shadow(self, table: SimTable, lists: list[tuple[str, CqlType, bool]]) -> None:
        schema = table.schema
        if self.catalog.table_exists(schema.keyspace, render.shadow_table_name(schema)):
            self.session.execute(render.alter_add(schema.keyspace, render.shadow_table_name(schema), lists))
        else:
            self.catalog.invalidate(schema.keyspace, schema.name)
            self.session.execute(render.create_shadow_table(self.catalog.table(schema.keyspace, schema.name).schema))

    def _set_cdc(self, keyspace: str, name: str, cdc: CdcOptions) -> None:
        """Record the options; create (or re-attach) the log table and first stream set on enable.
        Disabling keeps the log table, detached, as ScyllaDB does."""
        self.catalog.invalidate(keyspace, name)
        base = self.catalog.table(keyspace, name)
        schema = replace(base.schema, cdc=cdc)
        if render.list_columns(schema) and not self.catalog.table_exists(keyspace, render.shadow_table_name(schema)):
            self.session.execute(render.create_shadow_table(schema))
        if cdc.enabled:
            if self.catalog.table_exists(keyspace, schema.log_table_name):
                self._resync_log(schema)
            else:
                self.session.execute(render.create_log_table(schema))
                self.metadata.set_table_cdc(keyspace, schema.log_table_name, None, CDC_PARTITIONER)
            if base.tablets and not self.router.set_times(keyspace, name, refresh=True):
                self.router.create_tablet_streams(keyspace, name, self.catalog.tablets(keyspace) or 1)
        self.metadata.set_table_cdc(keyspace, name, describe_cdc_options(cdc), None)
        self._write_cdc_extension(keyspace, name)
        self.catalog.invalidate(keyspace, name)

    def _write_cdc_extension(self, keyspace: str, name: str) -> None:
        """ScyllaDB's `cdc` extension in system_schema.tables, as its options stand: once CDC was
        enabled the extension stays (with `enabled` false after a disable), as in ScyllaDB. Written
        after every ALTER too: Cassandra rewrites the table's schema row (and drops it) on each."""
        options = self.metadata.table_cdc(keyspace, name)
        if options is not None and (options.get("enabled") == "true" or self._has_cdc_extension(keyspace, name)):
            self.metadata.set_cdc_extension(keyspace, name, cdc_extension_bytes(options))

    def _has_cdc_extension(self, keyspace: str, name: str) -> bool:
        return self.metadata.cdc_extension(keyspace, name) is not None

    def _resync_log(self, schema: TableSchema) -> None:
        """Re-attaching a detached log: add the log columns of base columns added meanwhile, drop
        those of base columns dropped meanwhile."""
        rows = self.session.execute(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
            (schema.keyspace, schema.log_table_name),
        )
        present = {r.column_name for r in rows}
        wanted = dict(log_columns(schema).all)
        missing = [(n, t, False) for n, t in wanted.items() if n not in present]
        extra = [n for n in present if n not in wanted]
        if missing:
            self.session.execute(render.alter_add(schema.keyspace, schema.log_table_name, missing))
        if extra:
            self.session.execute(render.alter_drop(schema.keyspace, schema.log_table_name, extra))
