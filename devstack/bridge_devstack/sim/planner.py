"""Planning the writes of partition mutations, as ScyllaDB would apply them: the streams each
goes to (which validates its timestamps), the state its images need, the base and list shadow
writes, and the CDC log rows with their `cdc$time`s, the rows of a stream in one
single-partition batch. A plan sends nothing: the emulator runs it, the bulk loader sends plans
its own way."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.scylla import log_schema
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import ChangeRecord, LogRow
from bridge.scylla.schema import ImageMode, TableSchema
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim.catalog import Catalog, SimTable
from bridge_devstack.sim.changes import compute_records
from bridge_devstack.sim.mutation import PartitionMutation
from bridge_devstack.sim.prestate import StateReader
from bridge_devstack.sim.render import list_columns
from bridge_devstack.sim.state import PartitionState
from bridge_devstack.sim.writes import Write, base_writes, log_write, shadow_writes

StreamChooser = Callable[[SimTable, Sequence[Any], int], StreamId]


@dataclass(slots=True)
class WritePlan:
    """Writes for Cassandra: single-partition batches (base and list shadow per partition; log
    rows per stream), plus the records the log writes hold."""

    batches: list[list[Write]] = field(default_factory=list)
    log_batches: list[list[Write]] = field(default_factory=list)
    records: list[ChangeRecord] = field(default_factory=list)


def _has_images(schema: TableSchema) -> bool:
    options = schema.cdc
    return options.enabled and (options.preimage is not ImageMode.OFF or options.postimage)


_METADATA = {log_schema.OPERATION, log_schema.TTL, log_schema.END_OF_BATCH}


class WritePlanner:
    def __init__(self, catalog: Catalog, stream_for: StreamChooser, state_reader: StateReader) -> None:
        self._catalog = catalog
        self._stream_for = stream_for
        self._state_reader = state_reader
        # `cdc$time` low bits: random like ScyllaDB's, from a generator seeded once from the OS
        # (never from the emulator's seed, so two emulators do not repeat each other's) rather
        # than one urandom call per record, which costs a tenth of a bulk fill's time.
        self._time_bits = random.Random()
        self._names: dict[int, tuple[TableSchema, list[str]]] = {}

    def plan(
        self,
        mutations: Sequence[PartitionMutation],
        *,
        base: bool = True,
        states: Callable[[PartitionMutation], PartitionState] | None = None,
    ) -> WritePlan:
        """Everything `write` would send, without sending it: validates timestamps, chooses streams
        and reads the state images need (the bulk loader sends plans its own way).

        Bulk writers that keep the base rows' state themselves pass `states` (the partition's
        state before the mutation, updated in place to the state after it, as the pure pipeline
        does): images then need no base rows and no read per mutation. `base=False` leaves the
        base and list shadow writes out of the plan (log rows only); the caller then must not use
        list operations that read element keys from the shadow table."""
        chosen: list[tuple[PartitionMutation, SimTable, dict[int, StreamId]]] = []
        for mutation in mutations:
            table = self._catalog.table(mutation.table.keyspace, mutation.table.name)
            streams: dict[int, StreamId] = {}
            if table.schema.cdc.enabled:  # choosing streams validates every timestamp first
                streams = {ts: self._stream_for(table, mutation.key, ts) for ts in sorted(mutation.timestamps())}
            chosen.append((mutation, table, streams))
        plan = WritePlan()
        log_partitions: dict[tuple[str, str, bytes], list[Write]] = {}
        for mutation, table, streams in chosen:
            if states is not None and _has_images(table.schema):
                state = states(mutation)
            else:
                state = self._prior_state(mutation, table)
            if base:
                list_names = {name for name, _, _ in list_columns(mutation.table)}
                lists_before = {
                    (ck, name): self._state_reader.lists(mutation.table, mutation.key, ck, name)
                    for ck, row in [(None, mutation.static), *mutation.rows.items()]
                    for name in row.collections
                    if name in list_names
                }
                plan.batches.append(base_writes(mutation, lists_before))
                plan.batches.append(shadow_writes(mutation))
            if streams:
                plan.records += self._log(mutation, state, streams, log_partitions)
        # The rows of a stream go in one single-partition batch, which Cassandra applies atomically
        # and in isolation: a reader never sees part of a record, as with ScyllaDB's one mutation.
        plan.log_batches += log_partitions.values()
        return plan

    def _prior_state(self, mutation: PartitionMutation, table: SimTable) -> PartitionState:
        if not _has_images(table.schema):
            return PartitionState()
        cks = list(mutation.rows)
        if not table.schema.clustering_key and mutation.tombstone is not None:
            cks.append(())
        return self._state_reader.read(mutation.table, mutation.key, cks, not mutation.static.is_empty)

    def _log(
        self,
        mutation: PartitionMutation,
        state: PartitionState,
        streams: dict[int, StreamId],
        out: dict[tuple[str, str, bytes], list[Write]],
    ) -> list[ChangeRecord]:
        schema = mutation.table
        names = self._log_value_names(schema)
        records: list[ChangeRecord] = []
        for pending in compute_records(mutation, state):
            low = (self._time_bits.getrandbits(64) & 0x3FFFFFFFFFFFFFFF) | 0x8000000000000000  # IETF variant
            stream, cdc_time = streams[pending.timestamp], timeuuid_for(pending.timestamp, low)
            rows: list[LogRow] = []
            for seq, row in enumerate(pending.rows):
                last = seq == len(pending.rows) - 1
                write = log_write(schema, stream, cdc_time, seq, last, row, pending.timestamp)
                out.setdefault((schema.keyspace, schema.name, stream.raw), []).append(write)
                values = {n: row.values.get(n) for n in names}
                rows.append(LogRow(stream, cdc_time, seq, row.operation, row.ttl, last, values))
            records.append(ChangeRecord(schema.keyspace, schema.name, tuple(rows)))
        return records

    def _log_value_names(self, schema: TableSchema) -> list[str]:
        """Log columns other than the cdc$ metadata, cached per schema object (hot in bulk writes)."""
        cached = self._names.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = self._names[id(schema)] = (
                schema,
                [n for n, _ in log_schema.log_columns(schema).regular if n not in _METADATA],
            )
        return cached[1]
