"""The realistic benchmark backlog's mix (devstack/bridge_devstack/sim/backlog.py), without Cassandra: the tables are
declared with the same CQL, records come from the emulator's pure pipeline."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bridge.scylla.model import Operation
from bridge.scylla.schema import TableSchema
from bridge_devstack.sim.backlog import IMAGED, KINDS, TABLES, WIDE, BacklogMix, envelope_count
from bridge_devstack.sim.changes import PendingRecord, compute_records
from bridge_devstack.sim.mutation import PartitionMutation
from bridge_devstack.sim.state import PartitionState
from tests.unit.sim.pure import T, table_from_cql


def schemas() -> dict[str, TableSchema]:
    return {name: table_from_cql(f"CREATE TABLE {name} ({columns}) WITH cdc = {cdc}")
            for name, (columns, cdc) in TABLES.items()}


def operations(seed: int, count: int, partitions: int = 200) -> list[tuple[str, list[PartitionMutation]]]:
    tables = schemas()
    mix = BacklogMix(tables[WIDE], tables[IMAGED], seed=seed, partitions=partitions)
    return [mix.next(T + i) for i in range(count)]


def records_of(ops: list[tuple[str, list[PartitionMutation]]]) -> list[tuple[str, PendingRecord]]:
    """Every record, with the partition states carried from write to write (the fill does the same
    through `Emulator.plan(states=...)`)."""
    states: dict[tuple[str, tuple[Any, ...]], PartitionState] = {}
    out = []
    for _, mutations in ops:
        for mutation in mutations:
            state = states.setdefault((mutation.table.name, mutation.key), PartitionState())
            out += [(mutation.table.name, r) for r in compute_records(mutation, state)]
    return out


def test_the_mix_is_deterministic_for_a_seed() -> None:
    assert operations(7, 500) == operations(7, 500)
    assert operations(7, 500) != operations(8, 500)


def test_the_mix_hits_every_kind_and_both_tables() -> None:
    ops = operations(13, 3000)
    kinds = Counter(kind for kind, _ in ops)
    assert set(kinds) == set(KINDS), kinds
    assert kinds["insert"] > kinds["range_delete"] > 0
    tables = Counter(m.table.name for _, mutations in ops for m in mutations)
    assert set(tables) == {WIDE, IMAGED} and tables[WIDE] > tables[IMAGED] > 0


def test_inserts_write_every_column_and_updates_only_a_few_sometimes_null() -> None:
    ops = operations(13, 2000)
    wide = schemas()[WIDE]
    inserts = [m for kind, ms in ops if kind == "insert" for m in ms if m.table.name == WIDE]
    for mutation in inserts:
        (row,) = mutation.rows.values()
        assert row.marker is not None
        assert set(row.cells) | set(row.collections) == {c.name for c in wide.value_columns}
    assert len(wide.value_columns) == 10 and len({c.type.kind for c in wide.value_columns}) == 10
    updated = [row for kind, ms in ops if kind == "update" for m in ms for row in m.rows.values()]
    assert all(1 <= len(row.cells) <= 3 and row.marker is None for row in updated)
    assert any(not cell.live for row in updated for cell in row.cells.values())


def test_records_have_multi_row_records_range_deletes_and_pre_images_only_where_enabled() -> None:
    records = records_of(operations(13, 3000))
    by_table = Counter(table for table, _ in records)
    assert by_table[WIDE] > by_table[IMAGED] > 0
    ops = [(table, row.operation) for table, record in records for row in record.rows]
    assert {op for table, op in ops if table == WIDE} >= {
        Operation.INSERT, Operation.UPDATE, Operation.ROW_DELETE, Operation.PARTITION_DELETE,
        Operation.RANGE_DELETE_START_INCLUSIVE, Operation.RANGE_DELETE_END_EXCLUSIVE}
    assert not any(op is Operation.PRE_IMAGE for table, op in ops if table == WIDE)
    assert sum(1 for table, op in ops if table == IMAGED and op is Operation.PRE_IMAGE) > 50
    assert any(sum(1 for r in record.rows if not r.operation.is_image) >= 3 for _, record in records)


def test_envelope_count_follows_the_translation_rules() -> None:
    """One per insert/update, a delete plus its tombstone per row delete, nothing for range deletes,
    images or a clustered table's partition delete (a partition delete without clustering key is
    a row delete)."""
    ops = [Operation.PRE_IMAGE, Operation.INSERT, Operation.UPDATE, Operation.ROW_DELETE,
           Operation.RANGE_DELETE_START_INCLUSIVE, Operation.RANGE_DELETE_END_EXCLUSIVE,
           Operation.PARTITION_DELETE, Operation.POST_IMAGE]
    assert envelope_count(ops, clustered=True) == 4
    assert envelope_count(ops, clustered=False) == 6
    assert envelope_count(ops, clustered=True, tombstones=False) == 3
