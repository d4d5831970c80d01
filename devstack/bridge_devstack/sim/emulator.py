"""The ScyllaDB CDC emulator: base-table writes on real Cassandra, plus the CDC log rows and stream
metadata ScyllaDB would write for them (specification: ../shared/reference/cdc-log-format.md).

Usage::

    from bridge_devstack.sim import Emulator

    with Emulator.connect() as emu:                      # 127.0.0.1:9042, default settings
        emu.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        emu.execute("CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))"
                    " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}")
        records = emu.execute("UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0")
        records[0].stream_id, records[0].time, [row.operation for row in records[0].rows]
        emu.execute("INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?) USING TTL 60", [1, 2, 3])
        emu.insert("ks.t", {"pk": 1, "ck": 2, "v": 3}, ttl=60)     # the same through Python
        emu.bootstrap_node(delay_s=2)                    # a new vnode generation, 2 s from now

    # Tablets: a keyspace created with ScyllaDB's option gets per-table stream sets.
    emu.execute("CREATE KEYSPACE tk WITH replication = {...} AND tablets = {'enabled': true, 'initial': 4}")
    emu.tablets_split("tk", "t"); emu.tablets_merge("tk", "t"); emu.tablets_change("tk", "t", [0])

Or `Emulator(session, SimSettings(...))` over an existing cassandra-driver session (named-tuple
rows, the driver's default). One emulator is not thread-safe: use one per thread (they may share
the session). `execute` returns the change records written, one per (table,
partition, timestamp), as `bridge.scylla.model.ChangeRecord` with values in the canonical form of
`bridge_devstack.sim.values` (use `canonical()` on what the driver reads to compare).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cassandra import RequestValidationException
from cassandra.protocol import RequestValidationException as ServerRefusal

from bridge.scylla.model import ChangeRecord
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import streams as st
from bridge_devstack.sim.catalog import Catalog, SimTable
from bridge_devstack.sim.collections import ListKeys, coordinator_low_bits
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.lexer import split_statements
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.cql.parser import parse_statement
from bridge_devstack.sim.ddl import SchemaEditor
from bridge_devstack.sim.errors import InvalidRequestError, UnsupportedCqlError
from bridge_devstack.sim.executor import Executor
from bridge_devstack.sim.metadata import MetadataStore
from bridge_devstack.sim.mutation import PartitionMutation
from bridge_devstack.sim.planner import WritePlan, WritePlanner
from bridge_devstack.sim.prestate import StateReader
from bridge_devstack.sim.render import q
from bridge_devstack.sim.router import StreamRouter
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.sim.state import PartitionState
from bridge_devstack.sim.statements import MutationBuilder


def system_clock_us() -> int:
    return time.time_ns() // 1000


class Emulator:
    def __init__(
        self,
        session: Any,
        settings: SimSettings | None = None,
        *,
        clock: Callable[[], int] = system_clock_us,
        seed: int | None = None,
        keyspace: str | None = None,
    ) -> None:
        self.session = session
        self.settings = settings or SimSettings.from_env()
        self.clock = clock
        self.keyspace = keyspace
        self.rng = random.Random(seed)
        self.metadata = MetadataStore(
            session, self.settings.vnodes_keyspace, self.settings.tablets_keyspace, self.settings.sharding_ignore_msb
        )
        self.metadata.ensure_schema()
        self.catalog = Catalog(session, self.metadata)
        self.router = StreamRouter(self.metadata, self.settings, clock, self.rng)
        self.router.generation_times(refresh=True)  # a cluster always has a generation: make the first
        self.schema = SchemaEditor(session, self.catalog, self.metadata, self.router, self.settings.initial_tablets)
        self.executor = Executor(session)
        self.state_reader = StateReader(self.executor)
        self.planner = WritePlanner(self.catalog, self.stream_for, self.state_reader)
        self._list_key_bits = coordinator_low_bits()
        self._cluster: Any = None

    @classmethod
    def connect(
        cls,
        contact_points: Sequence[str] | None = None,
        port: int | None = None,
        settings: SimSettings | None = None,
        **kwargs: Any,
    ) -> Emulator:
        """An emulator with its own cassandra-driver cluster connection (closed by `close()`)."""
        from cassandra.cluster import Cluster

        base = settings or SimSettings.from_env()
        points = list(contact_points or base.contact_points)
        cluster = Cluster(points, port=port or base.port, protocol_version=5)
        emulator = cls(cluster.connect(), base, **kwargs)
        emulator._cluster = cluster
        return emulator

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ statements

    def execute(self, cql: str, params: Sequence[Any] = ()) -> list[ChangeRecord]:
        """Run one statement (or one BATCH); returns the CDC records written (none for DDL)."""
        return self.run(parse_statement(cql), params)

    def execute_script(self, text: str) -> list[ChangeRecord]:
        """Run `;`-separated statements in order; returns all records written."""
        records: list[ChangeRecord] = []
        for statement in split_statements(text):
            records += self.execute(statement)
        return records

    def run(self, statement: ast.Statement, params: Sequence[Any] = ()) -> list[ChangeRecord]:
        """Run a parsed statement. Cassandra's refusals (invalid requests, syntax, configuration)
        come out as `InvalidRequestError` too; connection problems stay driver errors."""
        try:
            if isinstance(statement, ast.Insert | ast.Update | ast.Delete | ast.Batch):
                return self._modify(statement, params)
            self._ddl(statement)
        # The driver maps most refusals to its own classes but raises a configuration error
        # (code 0x2300, e.g. a counter column in a plain table) as the protocol message itself.
        except (RequestValidationException, ServerRefusal) as exc:
            raise InvalidRequestError(f"Cassandra refused the statement: {exc}") from exc
        return []

    def _ddl(self, statement: ast.Statement) -> None:
        if isinstance(statement, ast.Use):
            if not self.catalog.keyspace_exists(statement.keyspace):
                raise InvalidRequestError(f"Keyspace '{statement.keyspace}' does not exist")
            self.keyspace = statement.keyspace
        elif isinstance(statement, ast.CreateKeyspace):
            self.schema.create_keyspace(statement)
        elif isinstance(statement, ast.CreateType):
            self.schema.create_type(self._keyspace(statement.keyspace), statement)
        elif isinstance(statement, ast.CreateTable):
            self.schema.create_table(self._keyspace(statement.table.keyspace), statement)
        elif isinstance(statement, ast.AlterTable):
            self.schema.alter_table(self.table_of(statement.table), statement)
        elif isinstance(statement, ast.Drop):
            self.schema.drop(statement, self._keyspace(statement.keyspace))
        elif isinstance(statement, ast.Truncate):
            self.schema.truncate(self.table_of(statement.table))
        elif isinstance(statement, ast.PassThrough):
            self.schema.pass_through(statement, statement.keyspace or self.keyspace)
        else:  # pragma: no cover - the parser produces nothing else
            raise UnsupportedCqlError(f"statement {type(statement).__name__}")

    def _keyspace(self, keyspace: str | None) -> str:
        if keyspace:
            return keyspace
        if self.keyspace is None:
            raise InvalidRequestError(
                "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
            )
        return self.keyspace

    def table_of(self, name: ast.TableName) -> SimTable:
        return self.catalog.table(self._keyspace(name.keyspace), name.name)

    def table(self, keyspace: str, name: str) -> SimTable:
        return self.catalog.table(keyspace, name)

    def _modify(self, statement: ast.Modification | ast.Batch, params: Sequence[Any]) -> list[ChangeRecord]:
        self.state_reader.reset()
        builder = MutationBuilder(
            self.table_of,
            Resolver(params, self.clock),
            self.clock(),
            self.state_reader.lists,
            ListKeys(self._list_key_bits),
        )
        builder.add(statement)
        return self.write(builder.result())

    # ------------------------------------------------------------ Python API

    def insert(
        self, table: str, values: Mapping[str, Any], *, ttl: int | None = None, timestamp: int | None = None
    ) -> list[ChangeRecord]:
        names = ", ".join(q(n) for n in values)
        marks = ", ".join("?" * len(values))
        using, extra = _using(ttl, timestamp)
        return self.execute(f"INSERT INTO {table} ({names}) VALUES ({marks}){using}", [*values.values(), *extra])

    def update(
        self,
        table: str,
        key: Mapping[str, Any],
        assignments: Mapping[str, Any],
        *,
        ttl: int | None = None,
        timestamp: int | None = None,
    ) -> list[ChangeRecord]:
        using, extra = _using(ttl, timestamp)
        sets = ", ".join(f"{q(n)} = ?" for n in assignments)
        where = " AND ".join(f"{q(n)} = ?" for n in key)
        return self.execute(
            f"UPDATE {table}{using} SET {sets} WHERE {where}", [*extra, *assignments.values(), *key.values()]
        )

    def delete(
        self, table: str, key: Mapping[str, Any], columns: Sequence[str] = (), *, timestamp: int | None = None
    ) -> list[ChangeRecord]:
        using, extra = _using(None, timestamp)
        targets = (", ".join(q(c) for c in columns) + " ") if columns else ""
        where = " AND ".join(f"{q(n)} = ?" for n in key)
        return self.execute(f"DELETE {targets}FROM {table}{using} WHERE {where}", [*extra, *key.values()])

    # ------------------------------------------------------------ writing

    def stream_for(self, table: SimTable, key: Sequence[Any], timestamp: int) -> StreamId:
        """The stream a write of partition `key` at `timestamp` (µs) goes to; raises ScyllaDB's
        errors for timestamps too far in the future or past."""
        schema = table.schema
        token = st.token_of(schema, key)
        if table.tablets:
            return self.router.tablet_stream(schema.keyspace, schema.name, token, timestamp)
        return self.router.vnode_stream(token, timestamp)

    def write(self, mutations: Sequence[PartitionMutation]) -> list[ChangeRecord]:
        """Apply mutations (one per table and partition): base, list shadow and CDC log writes."""
        plan = self.plan(mutations)
        self.executor.run(plan.batches + plan.log_batches)
        return plan.records

    def plan(
        self,
        mutations: Sequence[PartitionMutation],
        *,
        base: bool = True,
        states: Callable[[PartitionMutation], PartitionState] | None = None,
    ) -> WritePlan:
        """Everything `write` would send, without sending it (`WritePlanner.plan` says how)."""
        return self.planner.plan(mutations, base=base, states=states)

    # ------------------------------------------------------------ topology

    def bootstrap_node(
        self, delay_s: float | None = None, vnodes: int | None = None, shards: int | None = None
    ) -> st.Generation:
        """Add a virtual node and publish the new vnode generation, starting `delay_s` from now."""
        return self.router.bootstrap_node(delay_s, vnodes, shards)

    def generation_at(self, timestamp_us: int) -> st.Generation:
        times = [t for t in self.router.generation_times(refresh=True) if t * 1000 <= timestamp_us]
        if not times:
            raise InvalidRequestError(f"no vnode generation operates at {timestamp_us}")
        return self.router.generation(times[-1])

    def tablets_split(self, keyspace: str, table: str, delay_s: float | None = None) -> st.StreamSet:
        """Split every tablet of the table in two: a new stream set, `delay_s` from now."""
        return self.router.change_tablets(keyspace, table, lambda s: st.split_streams(s, self.rng), delay_s)

    def tablets_merge(self, keyspace: str, table: str, delay_s: float | None = None) -> st.StreamSet:
        """Merge the table's tablets pairwise: a new stream set, `delay_s` from now."""
        return self.router.change_tablets(keyspace, table, lambda s: st.merge_streams(s, self.rng), delay_s)

    def tablets_change(
        self,
        keyspace: str,
        table: str,
        positions: Sequence[int],
        *,
        split: bool = False,
        delay_s: float | None = None,
    ) -> st.StreamSet:
        """A partial change: close the streams at `positions` (token order) and open replacements
        (the same tablets, or with `split` each of them halved); the other streams stay open."""
        if split:
            return self.router.change_tablets(
                keyspace, table, lambda s: st.split_streams(s, self.rng, positions), delay_s
            )
        return self.router.change_tablets(
            keyspace, table, lambda s: st.replace_streams(s, positions, self.rng), delay_s
        )

    def stream_sets(self, keyspace: str, table: str) -> list[st.StreamSet]:
        times = self.router.set_times(keyspace, table, refresh=True)
        return [self.router.stream_set(keyspace, table, t) for t in times]


def _using(ttl: int | None, timestamp: int | None) -> tuple[str, list[int]]:
    parts, values = [], []
    if ttl is not None:
        parts.append("TTL ?")
        values.append(ttl)
    if timestamp is not None:
        parts.append("TIMESTAMP ?")
        values.append(timestamp)
    return ((" USING " + " AND ".join(parts)) if parts else ""), values
