"""A workload whose every change can be checked in Kafka: rounds of bulk updates that set
`v = round * per_round + i` on row (i % partitions, i // partitions), so each key's values must
arrive once each and in increasing order; then some deletes."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from bridge_devstack.sim import Emulator
from bridge_devstack.sim.load import bulk_fill
from tests.integration.worker.harness import CONFIDENCE_WINDOW_MS

PARTITIONS = 200
CHUNK = 100
# A workload whose late chunks exceed this share of its updates shows too little to pass
MOST_LATE = 0.1


@dataclass
class Workload:
    tables: list[tuple[str, str]]
    rounds: int
    per_round: int
    deleted: dict[tuple[str, str], set[tuple[int, int]]] = field(default_factory=dict)
    slowest_chunk_s: float = 0.0  # from a chunk's first stamp to its last row written
    # per table: the values written by chunks that landed later than the workers' confidence
    # window after their stamp, which a reader may have passed already (write_round)
    late: dict[tuple[str, str], set[int]] = field(default_factory=lambda: collections.defaultdict(set))

    def create(self, emulator: Emulator) -> None:
        for keyspace, table in self.tables:
            emulator.execute(f"CREATE TABLE {keyspace}.{table} (pk int, ck int, v int, PRIMARY KEY (pk, ck))"
                             " WITH cdc = {'enabled': true}")

    def write_round(self, emulator: Emulator, number: int) -> None:
        # Small chunks, each stamped just before it is sent: the emulator stamps `cdc$time` when
        # it plans a chunk. Big pipelined chunks on a loaded machine (load 15 on 2 cores) landed
        # more than the tests' 2 s confidence window after the chunk's first row's time, so the
        # readers had already passed them: the first row of a chunk was "lost" by the test's own
        # late write (exactly what the confidence window is for), not by the bridge. A chunk that
        # still lands later than the window (a stalled machine) may be missed as ScyllaDB's own
        # late writes are: its values are expected at most once, in order (`check`).
        first_value = number * self.per_round
        for keyspace, table in self.tables:
            report = bulk_fill(emulator, keyspace, table, self.per_round, partitions=PARTITIONS,
                               first_value=first_value, chunk=CHUNK, pipelined=False)
            for chunk in report.chunks:
                self.slowest_chunk_s = max(self.slowest_chunk_s, chunk.seconds)
                if chunk.seconds > CONFIDENCE_WINDOW_MS / 1000:
                    self.late[(keyspace, table)].update(range(first_value + chunk.first, first_value + chunk.end))

    def delete_some(self, emulator: Emulator, count: int) -> None:
        for keyspace, table in self.tables:
            keys = {(i % PARTITIONS, i // PARTITIONS) for i in range(0, self.per_round, self.per_round // count)}
            for pk, ck in sorted(keys):
                emulator.execute(f"DELETE FROM {keyspace}.{table} WHERE pk = {pk} AND ck = {ck}")
            self.deleted[(keyspace, table)] = keys

    def expected_events(self) -> int:
        return len(self.tables) * self.rounds * self.per_round + sum(len(k) for k in self.deleted.values())

    def check(self, table: tuple[str, str], messages: Sequence[tuple[bytes | None, bytes | None]]) -> None:
        """Each update once, per key in increasing order, a delete last where one was written."""
        seen: dict[tuple[int, int], list[object]] = collections.defaultdict(list)
        for key, value in messages:
            assert key is not None
            decoded = json.loads(key)
            row = (decoded["pk"], decoded["ck"])
            if value is None:
                seen[row].append("tombstone")
                continue
            envelope = json.loads(value)
            seen[row].append(envelope["after"]["v"]["value"] if envelope["op"] == "u" else envelope["op"])
        deleted = self.deleted.get(table, set())
        late = self.late.get(table, set())
        assert len(late) <= MOST_LATE * self.rounds * self.per_round, \
            f"{table}: {len(late)} updates landed later than the confidence window: the machine stalled the writer"
        wrong: list[str] = []
        missing: set[int] = set()  # the partitions of rows that got nothing: a stream never read?
        excused = 0  # late updates not delivered
        for i in range(self.per_round):
            row = (i % PARTITIONS, i // PARTITIONS)
            got = seen.pop(row, [])
            wanted: list[object] = [v for v in (r * self.per_round + i for r in range(self.rounds))
                                    if v not in late or v in got]
            excused += self.rounds - len(wanted)
            if row in deleted:
                wanted += ["d", "tombstone"]
            if got != wanted:
                wrong.append(f"row {row}: got {got}, wanted {wanted}")
                if not got:
                    missing.add(row[0])
        # All the differences counted, so a failure tells one late stream from a general loss, and
        # the writer's slowest chunk a loss from the test's own late write (write_round says how).
        assert not wrong, (f"{table}: {len(wrong)} of {self.per_round} rows differ ({len(messages)} messages "
                           f"read); rows with nothing in partitions {sorted(missing)}; first: {wrong[0]}; the "
                           f"writer's slowest chunk of {CHUNK} took {self.slowest_chunk_s:.1f} s from its stamp; "
                           f"{excused} of {len(late)} late updates not delivered")
        assert not seen, f"unexpected rows {list(seen)[:5]}"
