"""A realistic CDC backlog for benchmarks, written as fast as `bulk_fill` writes its narrow one.

Two tables in one keyspace: `wide` (ten value columns of mixed types, no images) and `imaged`
(a smaller table with `'preimage': true`). `BacklogMix` yields a seeded, deterministic mix of
operations as partition mutations built directly (no CQL parsing): inserts of every column,
partial updates (a few columns, some set to null), collection element changes, row deletes,
multi-row writes (several rows of one partition in one statement: one record, several log
rows), batches (an update and a row delete in one partition), and a few range and partition
deletes. `realistic_fill` plans them with the emulator and sends the log rows with the bulk
sender. No base rows are needed: the pre-images come from the partition states the fill keeps
in memory (the emulator's pure pipeline carries them from write to write, as ScyllaDB's
read-before-write would see them; one difference: a row written only by updates whose cells all
became null is gone from a real base table, here it stays and gets a pre-image of nulls).

`envelope_count` says how many Kafka records the bridge must produce for the records written
(design.md 2.2): one per insert/update row, a delete and its tombstone per row delete, nothing
for range deletes, clustered partition deletes and images.
"""

from __future__ import annotations

import datetime
import random
import string
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from bridge.scylla.model import ChangeRecord, Operation
from bridge.scylla.schema import Column, TableSchema
from bridge_devstack.sim.clustering import Bound, ClusteringRange
from bridge_devstack.sim.emulator import Emulator
from bridge_devstack.sim.errors import ConfigurationError
from bridge_devstack.sim.load import send_writes
from bridge_devstack.sim.mutation import Cell, PartitionMutation, RowWrite, delete_collection, set_element, set_marker
from bridge_devstack.sim.render import qualified
from bridge_devstack.sim.state import PartitionState

WIDE, IMAGED = "wide", "imaged"
TABLES: dict[str, tuple[str, str]] = {
    WIDE: ("pk bigint, ck int, i int, b bigint, t text, f boolean, d double, ts timestamp, u uuid, dec decimal,"
           " tags set<text>, counts map<text, int>, PRIMARY KEY (pk, ck)", "{'enabled': true}"),
    IMAGED: ("pk int, ck int, v int, t text, tags set<text>, PRIMARY KEY (pk, ck)",
             "{'enabled': true, 'preimage': true}"),
}
KINDS = ("insert", "update", "collection", "delete", "multi_row", "batch", "range_delete", "partition_delete")
WEIGHTS = (30.0, 30.0, 12.0, 10.0, 8.0, 8.0, 1.5, 0.5)
IMAGED_SHARE = 0.2  # of the operations go to the pre-image table
NULL_SHARE = 0.15  # of the columns a partial update sets are set to null
WORDS = tuple(f"{a}{b}" for a in ("red", "green", "blue", "grey") for b in ("fox", "owl", "elk", "cod"))
EPOCH_2025_MS = 1_735_689_600_000
# The emulator holds timestamps as the driver returns them: naive UTC datetimes.
_UNIX_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC).replace(tzinfo=None)


class BacklogMix:
    """Operations over `wide` and `imaged`; the same seed gives the same operations (kinds, keys,
    values) given the same timestamps. `imaged` has a twentieth of `wide`'s partitions, so its rows
    are written again often enough to have pre-images."""

    def __init__(self, wide: TableSchema, imaged: TableSchema, *, seed: int = 13, partitions: int = 10_000,
                 rows_per_partition: int = 20) -> None:
        self.tables = {WIDE: wide, IMAGED: imaged}
        self.rng = random.Random(seed)
        self.partitions = {WIDE: partitions, IMAGED: max(1, partitions // 20)}
        self.rows = rows_per_partition
        self.scalars = {n: [c for c in t.value_columns if not c.type.is_multi_cell] for n, t in self.tables.items()}
        self.collections = {n: [c for c in t.value_columns if c.type.is_multi_cell] for n, t in self.tables.items()}

    def next(self, timestamp: int) -> tuple[str, list[PartitionMutation]]:
        """One operation at `timestamp` (µs): its kind and its mutations (one per partition)."""
        rng = self.rng
        kind = rng.choices(KINDS, WEIGHTS)[0]
        name = IMAGED if rng.random() < IMAGED_SHARE else WIDE
        schema = self.tables[name]
        mutation = PartitionMutation(schema, (rng.randrange(self.partitions[name]),))
        ck = rng.randrange(self.rows)
        if kind == "insert":
            self._insert(mutation.row((ck,)), name, timestamp)
        elif kind == "update":
            self._update(mutation.row((ck,)), name, timestamp)
        elif kind == "collection":
            self._collection(mutation.row((ck,)), name, timestamp)
        elif kind == "delete":
            mutation.row((ck,)).deletion = timestamp
        elif kind == "multi_row":
            write = self._insert if rng.random() < 0.5 else self._update
            for row in rng.sample(range(self.rows), rng.randint(2, 5)):
                write(mutation.row((row,)), name, timestamp)
        elif kind == "batch":
            self._update(mutation.row((ck,)), name, timestamp)
            mutation.row(((ck + 1) % self.rows,)).deletion = timestamp
        elif kind == "range_delete":
            start = Bound((ck,), True)
            mutation.delete_range(ClusteringRange(start, Bound((ck + rng.randint(1, 4),), False)), timestamp)
        else:
            mutation.delete_partition(timestamp)
        return kind, [mutation]

    def _insert(self, row: RowWrite, name: str, ts: int) -> None:
        set_marker(row, Cell(ts))
        for column in self.scalars[name]:
            row.cells[column.name] = Cell(ts, value=self._value(column))
        for column in self.collections[name]:
            self._overwrite_collection(row, column, ts)

    def _update(self, row: RowWrite, name: str, ts: int) -> None:
        rng = self.rng
        scalars = self.scalars[name]
        for column in rng.sample(scalars, rng.randint(1, min(3, len(scalars)))):
            live = rng.random() >= NULL_SHARE
            row.cells[column.name] = Cell(ts, value=self._value(column)) if live else Cell(ts, live=False)

    def _collection(self, row: RowWrite, name: str, ts: int) -> None:
        rng = self.rng
        collections = self.collections[name]
        for column in rng.sample(collections, rng.randint(1, len(collections))):
            choice = rng.random()
            if choice < 0.15:
                self._overwrite_collection(row, column, ts)
            elif column.type.kind == "set":  # tags + {w} / tags - {w}
                set_element(row, column.name, rng.choice(WORDS), Cell(ts, live=choice < 0.7), None)
            elif choice < 0.7:  # counts[k] = n
                set_element(row, column.name, rng.choice(WORDS), Cell(ts, value=rng.randrange(1000)), None)
            else:  # counts - {k}
                set_element(row, column.name, rng.choice(WORDS), Cell(ts, live=False), None)

    def _overwrite_collection(self, row: RowWrite, column: Column, ts: int) -> None:
        """`c = {...}`: a collection tombstone just before the new elements (0 to 3 of them)."""
        delete_collection(row, column.name, ts - 1)
        for word in self.rng.sample(WORDS, self.rng.randint(0, 3)):
            value = self.rng.randrange(1000) if column.type.kind == "map" else None
            set_element(row, column.name, word, Cell(ts, value=value), None)

    def _value(self, column: Column) -> Any:
        rng, kind = self.rng, column.type.kind
        if kind == "int":
            return rng.randrange(-(2**31), 2**31)
        if kind == "bigint":
            return rng.getrandbits(63)
        if kind == "text":
            return "".join(rng.choices(string.ascii_letters, k=rng.randint(8, 40)))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "double":
            return rng.random() * 1e6
        if kind == "timestamp":
            millis = EPOCH_2025_MS + rng.randrange(365 * 86_400_000)
            return _UNIX_EPOCH + datetime.timedelta(milliseconds=millis)
        if kind == "uuid":
            return uuid.UUID(int=rng.getrandbits(128), version=4)
        if kind == "decimal":
            return Decimal(rng.randrange(-(10**9), 10**9)).scaleb(-2)
        raise ConfigurationError(f"backlog mix: no values for column {column.name} of type {column.type}")


_UPSERTS = frozenset({Operation.INSERT, Operation.UPDATE})
_DELETES = frozenset({Operation.ROW_DELETE, Operation.SERVICE_ROW_DELETE})
_PARTITION_DELETES = frozenset({Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE})


def envelope_count(operations: Iterable[Operation], clustered: bool, tombstones: bool = True) -> int:
    """Kafka records the bridge produces for these log rows of one table (design.md 2.2)."""
    per_delete = 2 if tombstones else 1
    count = 0
    for op in operations:
        if op in _UPSERTS:
            count += 1
        elif op in _DELETES or (op in _PARTITION_DELETES and not clustered):
            count += per_delete
    return count


def is_change(op: Operation) -> bool:
    """A delta log row (not an image): what the benchmark counts as one change."""
    return not op.is_image


@dataclass(slots=True)
class BacklogReport:
    tables: list[str] = field(default_factory=list)
    operations: int = 0
    records: int = 0
    changes: int = 0  # delta log rows
    log_rows: int = 0  # with the pre-images
    envelopes: int = 0  # records the bridge must produce, tombstones on delete included
    envelopes_by_table: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0

    def count(self, records: list[ChangeRecord], clustered: Callable[[str], bool]) -> None:
        for record in records:
            operations = [row.operation for row in record.rows]
            envelopes = envelope_count(operations, clustered(record.table))
            self.records += 1
            self.log_rows += len(operations)
            self.changes += sum(1 for op in operations if is_change(op))
            self.envelopes += envelopes
            self.envelopes_by_table[record.table] += envelopes

    def as_dict(self) -> dict[str, Any]:
        return {
            "tables": self.tables, "operations": self.operations, "records": self.records,
            "changes": self.changes, "log_rows": self.log_rows, "envelopes": self.envelopes,
            "envelopes_by_table": dict(self.envelopes_by_table), "kinds": dict(sorted(self.kinds.items())),
            "elapsed_s": round(self.elapsed_s, 3),
            "changes_per_s": round(self.changes / self.elapsed_s) if self.elapsed_s else None,
        }


def realistic_fill(
    emulator: Emulator,
    keyspace: str,
    changes: int,
    *,
    seed: int = 13,
    partitions: int = 10_000,
    rows_per_partition: int = 20,
    chunk: int = 2000,
    concurrency: int = 128,
    base: bool = False,
) -> BacklogReport:
    """Create `keyspace.wide` and `keyspace.imaged` (they must not exist: the pre-images come from
    the states this fill keeps) and write operations of the mix until at least `changes` delta
    log rows are written (a few more: the last operation is written whole). `base` also writes
    the base rows (not needed by readers of the log)."""
    for name, (columns, cdc) in TABLES.items():
        if emulator.catalog.table_exists(keyspace, name):
            raise ConfigurationError(f"realistic backlog: table {keyspace}.{name} exists; fill a fresh keyspace")
        emulator.execute(f"CREATE TABLE {qualified(keyspace, name)} ({columns}) WITH cdc = {cdc}")
    schemas = {name: emulator.table(keyspace, name).schema for name in TABLES}
    mix = BacklogMix(schemas[WIDE], schemas[IMAGED], seed=seed, partitions=partitions,
                     rows_per_partition=rows_per_partition)
    states: dict[tuple[str, tuple[Any, ...]], PartitionState] = {}

    def state_of(mutation: PartitionMutation) -> PartitionState:
        return states.setdefault((mutation.table.name, mutation.key), PartitionState())

    def clustered(table: str) -> bool:
        return bool(schemas[table].clustering_key)

    report = BacklogReport(tables=[f"{keyspace}.{name}" for name in TABLES])
    start = time.monotonic()
    last = 0
    with ThreadPoolExecutor(max_workers=1) as sender:  # one chunk is sent while the next is planned
        pending: Future[None] | None = None
        while report.changes < changes:
            # Changes per operation are known once planned: a first small chunk gives the mean
            # that sizes the next ones, so the fill ends close to `changes`.
            if report.operations:
                size = int((changes - report.changes) * report.operations / max(1, report.changes))
            else:
                size = min(changes, 100)
            mutations: list[PartitionMutation] = []
            for _ in range(max(1, min(chunk, size))):
                last = max(emulator.clock(), last + 1)  # one timestamp per operation, increasing
                kind, written = mix.next(last)
                report.kinds[kind] += 1
                report.operations += 1
                mutations += written
            plan = emulator.plan(mutations, base=base, states=state_of)
            writes = [w for batch in plan.log_batches + (plan.batches if base else []) for w in batch]
            if pending is not None:
                pending.result()
            pending = sender.submit(send_writes, emulator, writes, concurrency)
            report.count(plan.records, clustered)
        if pending is not None:
            pending.result()
    report.elapsed_s = time.monotonic() - start
    return report


__all__ = ["IMAGED", "KINDS", "TABLES", "WIDE", "BacklogMix", "BacklogReport", "envelope_count", "realistic_fill"]
