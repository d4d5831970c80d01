"""Load for the emulator: a paced mix of writes over several tables, and a bulk filler that puts M
changes into a log table as fast as the machine allows (prepared statements, concurrent execution).

Mixed load goes through `Emulator.execute` statement by statement (so pre-images read the base
like ScyllaDB), paced to `rate` operations per second; the achieved rate is reported, and stays
below the target when one process cannot keep up. Bulk mode skips parsing and images: it builds
single-cell updates directly and sends base and log writes with
`cassandra.concurrent.execute_concurrent_with_args`.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cassandra.concurrent import execute_concurrent

from bridge_devstack.sim.emulator import Emulator
from bridge_devstack.sim.errors import ConfigurationError
from bridge_devstack.sim.mutation import Cell, PartitionMutation
from bridge_devstack.sim.render import qualified
from bridge_devstack.sim.writes import Write

KINDS = ("insert", "update", "collection", "delete", "range_delete", "partition_delete", "batch")
DEFAULT_MIX: Mapping[str, float] = {"insert": 4, "update": 3, "collection": 1, "delete": 1, "batch": 1}
LOAD_COLUMNS = "pk int, ck int, v int, t text, m map<int, text>, PRIMARY KEY (pk, ck)"
DEFAULT_CDC = "{'enabled': true, 'preimage': true, 'postimage': true}"


def parse_mix(text: str) -> dict[str, float]:
    """`insert=4,update=3,...` -> weights; unknown kinds and bad weights are errors."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        if name not in KINDS:
            raise ConfigurationError(f"mix: unknown operation {name!r} (known: {', '.join(KINDS)})")
        try:
            mix[name] = float(weight or 1)
        except ValueError:
            raise ConfigurationError(f"mix: weight of {name} must be a number, got {weight!r}") from None
    if not mix or sum(mix.values()) <= 0:
        raise ConfigurationError("mix: give at least one operation with a positive weight")
    return mix


@dataclass(frozen=True, slots=True)
class LoadSpec:
    keyspace: str
    tables: int = 2
    table_prefix: str = "load"
    rate: float = 100.0
    duration_s: float | None = 10.0
    operations: int | None = None
    mix: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    partitions: int = 50
    rows_per_partition: int = 20
    cdc: str = DEFAULT_CDC
    seed: int | None = None
    workers: int = 1  # threads, each with its own emulator and its own partition keys

    def __post_init__(self) -> None:
        for name in ("tables", "partitions", "rows_per_partition", "workers"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.rate <= 0:
            raise ConfigurationError(f"rate: must be positive, got {self.rate}")


class ChunkLanding(NamedTuple):
    """A chunk of bulk_fill's changes `first` to `end` (exclusive), written `seconds` after the
    moment before their `cdc$time` was stamped (an upper bound of their lateness)."""

    first: int
    end: int
    seconds: float


@dataclass(slots=True)
class LoadReport:
    operations: int = 0
    records: int = 0
    rows: int = 0
    elapsed_s: float = 0.0
    refused: int = 0
    # bulk_fill: each chunk's changes and how long they took from their `cdc$time` stamps to the
    # end of their send, to compare with a reader's confidence window
    chunks: list[ChunkLanding] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        rate = self.operations / self.elapsed_s if self.elapsed_s else 0.0
        return {
            "operations": self.operations,
            "records": self.records,
            "log_rows": self.rows,
            "refused": self.refused,
            "elapsed_s": round(self.elapsed_s, 3),
            "operations_per_s": round(rate, 1),
            "records_per_s": round(self.records / self.elapsed_s, 1) if self.elapsed_s else 0.0,
        }

    def add(self, other: LoadReport) -> None:
        self.operations += other.operations
        self.records += other.records
        self.rows += other.rows
        self.refused += other.refused
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)


class LoadGenerator:
    def __init__(self, emulator: Emulator, spec: LoadSpec) -> None:
        self.emu = emulator
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.tables = [f"{spec.table_prefix}_{i}" for i in range(spec.tables)]
        self._kinds = list(spec.mix)
        self._weights = [spec.mix[k] for k in self._kinds]

    def prepare(self) -> None:
        """Create the load tables (if missing) with the spec's CDC options."""
        for name in self.tables:
            if not self.emu.catalog.table_exists(self.spec.keyspace, name):
                self.emu.execute(
                    f"CREATE TABLE {qualified(self.spec.keyspace, name)} ({LOAD_COLUMNS}) WITH cdc = {self.spec.cdc}"
                )

    def statement(self, rng: random.Random | None = None, lane: int = 0) -> tuple[str, list[Any]]:
        """One random statement of the mix (CQL with markers, values). With several workers, lane
        `i` only writes partitions `pk % workers == i`, so no two workers race on a row (images
        stay meaningful, as ScyllaDB requires of concurrent writers)."""
        rng = rng or self.rng
        spec = self.spec
        kind = rng.choices(self._kinds, self._weights)[0]
        table = qualified(spec.keyspace, rng.choice(self.tables))
        pk = lane + spec.workers * rng.randrange(max(1, spec.partitions // spec.workers))
        ck = rng.randrange(spec.rows_per_partition)
        value = rng.randrange(1_000_000)
        if kind == "insert":
            return f"INSERT INTO {table} (pk, ck, v, t) VALUES (?, ?, ?, ?)", [pk, ck, value, f"t{value}"]
        if kind == "update":
            return f"UPDATE {table} SET v = ? WHERE pk = ? AND ck = ?", [value, pk, ck]
        if kind == "collection":
            return f"UPDATE {table} SET m = m + ?, t = ? WHERE pk = ? AND ck = ?", [
                {value % 10: f"x{value}"},
                "c",
                pk,
                ck,
            ]
        if kind == "delete":
            return f"DELETE FROM {table} WHERE pk = ? AND ck = ?", [pk, ck]
        if kind == "range_delete":
            return f"DELETE FROM {table} WHERE pk = ? AND ck >= ? AND ck < ?", [pk, ck, ck + 3]
        if kind == "partition_delete":
            return f"DELETE FROM {table} WHERE pk = ?", [pk]
        other = qualified(spec.keyspace, rng.choice(self.tables))
        return (
            f"BEGIN UNLOGGED BATCH UPDATE {table} SET v = ? WHERE pk = ? AND ck = ?;"
            f" INSERT INTO {other} (pk, ck, t) VALUES (?, ?, ?); APPLY BATCH",
            [value, pk, ck, pk, (ck + 1) % spec.rows_per_partition, "b"],
        )

    def run(self, progress: Callable[[LoadReport], None] | None = None) -> LoadReport:
        """Run the mix at `rate` (shared by the workers) until `operations` are done or
        `duration_s` has passed."""
        spec = self.spec
        if spec.workers == 1:
            return self._lane(self.emu, 0, self.rng, spec.operations, progress)
        budgets = [
            None if spec.operations is None else spec.operations // spec.workers + (i < spec.operations % spec.workers)
            for i in range(spec.workers)
        ]
        total = LoadReport()
        with ThreadPoolExecutor(max_workers=spec.workers) as pool:
            futures = [
                pool.submit(
                    self._lane,
                    Emulator(self.emu.session, self.emu.settings, keyspace=self.emu.keyspace),
                    i,
                    random.Random(self.rng.random()),
                    budgets[i],
                    None,
                )
                for i in range(spec.workers)
            ]
            for future in futures:
                total.add(future.result())
        return total

    def _lane(
        self,
        emulator: Emulator,
        lane: int,
        rng: random.Random,
        operations: int | None,
        progress: Callable[[LoadReport], None] | None,
    ) -> LoadReport:
        spec = self.spec
        rate = spec.rate / spec.workers
        report = LoadReport()
        start = time.monotonic()
        deadline = start + spec.duration_s if spec.duration_s is not None else float("inf")
        while operations is None or report.operations < operations:
            due = start + report.operations / rate
            now = time.monotonic()
            if max(now, due) >= deadline:
                break
            if due > now:
                time.sleep(due - now)
            cql, params = self.statement(rng, lane)
            records = emulator.execute(cql, params)
            report.operations += 1
            report.records += len(records)
            report.rows += sum(len(r.rows) for r in records)
            if progress and report.operations % 1000 == 0:
                report.elapsed_s = time.monotonic() - start
                progress(report)
        report.elapsed_s = time.monotonic() - start
        return report


BULK_TABLE_COLUMNS = "pk int, ck int, v int, PRIMARY KEY (pk, ck)"


def bulk_fill(
    emulator: Emulator,
    keyspace: str,
    table: str,
    changes: int,
    *,
    partitions: int = 1000,
    concurrency: int = 128,
    chunk: int = 5000,
    base: bool = True,
    cdc: str = "{'enabled': true}",
    first_value: int = 0,
    pipelined: bool = True,
) -> LoadReport:
    """Write `changes` single-row updates (one record each) into `table` (created if missing):
    change i sets `v = first_value + i` on row (i % partitions, i // partitions), so calling it
    again with a higher `first_value` updates the same rows in order.

    `cdc$time` is stamped when a chunk is planned, so a row lands as late as its chunk takes to
    send; `pipelined` (plan the next chunk while one is sent) is fastest, but a row must not land
    later than a reader's confidence window after its time: tests that read while they write
    pass small chunks and `pipelined=False`, as ScyllaDB stamps a write when it arrives."""
    if not emulator.catalog.table_exists(keyspace, table):
        emulator.execute(f"CREATE TABLE {qualified(keyspace, table)} ({BULK_TABLE_COLUMNS}) WITH cdc = {cdc}")
    schema = emulator.table(keyspace, table).schema
    report = LoadReport()
    start = time.monotonic()

    def send(writes: list[Write], first: int, end: int, stamped: float) -> None:  # in the one sender thread
        send_writes(emulator, writes, concurrency)
        report.chunks.append(ChunkLanding(first, end, time.monotonic() - stamped))

    # One chunk is sent (by a helper thread) while the next is planned.
    with ThreadPoolExecutor(max_workers=1) as sender:
        pending: Future[None] | None = None
        for first in range(0, changes, chunk):
            stamped, end = time.monotonic(), min(first + chunk, changes)
            mutations = []
            for i in range(first, end):
                mutation = PartitionMutation(schema, (i % partitions,))
                mutation.row((i // partitions,)).cells["v"] = Cell(emulator.clock(), value=first_value + i)
                mutations.append(mutation)
            plan = emulator.plan(mutations, base=base)
            writes = [w for batch in plan.log_batches + (plan.batches if base else []) for w in batch]
            if pending is not None:
                pending.result()
            pending = sender.submit(send, writes, first, end, stamped)
            if not pipelined:
                pending.result()
            report.operations += len(mutations)
            report.records += len(plan.records)
            report.rows += sum(len(r.rows) for r in plan.records)
        if pending is not None:
            pending.result()
    report.elapsed_s = time.monotonic() - start
    return report


def send_writes(emulator: Emulator, writes: list[Write], concurrency: int, batch_size: int = 50) -> None:
    """Log rows of one stream go in unlogged single-partition batches (far fewer round trips);
    the rest as concurrent single statements."""
    groups: dict[Any, list[Write]] = defaultdict(list)
    statements: list[tuple[Any, Any]] = []
    for write in writes:
        if write.partition is None:
            statements.append((emulator.executor.prepared(write.cql), write.values))
        else:
            groups[write.partition].append(write)
    for group in groups.values():
        for first in range(0, len(group), batch_size):
            statements.append((emulator.executor.batch(group[first : first + batch_size]), None))
    execute_concurrent(emulator.session, statements, concurrency=concurrency, raise_on_first_error=True)


__all__ = ["DEFAULT_MIX", "KINDS", "ChunkLanding", "LoadGenerator", "LoadReport", "LoadSpec", "bulk_fill", "parse_mix",
           "send_writes"]
