"""Real statements through the emulator on the real Cassandra, the log rows read back with the
cassandra-driver (so values are exactly what the driver returns: OrderedMapSerializedKey,
SortedSet, UDT namedtuples, ...), translated and written with every serializer."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.envelope.records import DropReason
from bridge.envelope.settings import EnvelopeSettings
from bridge.envelope.translator import Translator
from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge.scylla.model import ChangeRecord
from bridge.scylla.pages import RowDecoder
from bridge.scylla.records import RecordAssembler
from bridge.scylla.schema import TableSchema
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from tests.unit.envelope.support import Wire


@pytest.fixture
def emu(cassandra_session: Any, keyspace: str) -> Iterator[Emulator]:
    """An emulator whose stream metadata lives in the test's own keyspace (dropped afterwards)."""
    yield Emulator(cassandra_session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))


def read_log(session: Any, keyspace: str, table: str) -> dict[tuple[bytes, int], ChangeRecord]:
    """Every record of the log table, by (stream, cdc$time), as the driver returns the rows."""
    result = session.execute(f"SELECT * FROM {keyspace}.{table}_scylla_cdc_log")
    decoder = RowDecoder(table, result.column_names)
    rows = sorted(
        (decoder.decode(r) for r in result), key=lambda r: (r.stream_id.raw, timeuuid_sort_key(r.time), r.batch_seq_no)
    )
    by_stream = defaultdict(list)
    for log_row in rows:
        by_stream[log_row.stream_id].append(log_row)
    records: dict[tuple[bytes, int], ChangeRecord] = {}
    for stream_rows in by_stream.values():
        assembler = RecordAssembler(keyspace, table)
        for assembled in assembler.add(stream_rows):
            records[(assembled.stream_id.raw, assembled.time.int)] = assembled
        assembler.finish()
    return records


STATEMENTS = [
    "INSERT INTO {ks}.t (pk, ck, v, m) VALUES (1, 1, 'a', {{1: 'x'}})",
    "UPDATE {ks}.t SET v = 'b' WHERE pk = 1 AND ck = 1",
    "UPDATE {ks}.t SET s = 7 WHERE pk = 1",
    "UPDATE {ks}.t SET m = m + {{2: 'y'}}, l = l + [5, 6] WHERE pk = 1 AND ck = 1",
    "UPDATE {ks}.t SET u.a = 1 WHERE pk = 1 AND ck = 1",
    "DELETE m[1] FROM {ks}.t WHERE pk = 1 AND ck = 1",
    "UPDATE {ks}.t SET fu = {{a: 2, b: 'z'}}, v = null WHERE pk = 1 AND ck = 1",
    "DELETE FROM {ks}.t WHERE pk = 1 AND ck = 1",
    "DELETE FROM {ks}.t WHERE pk = 1 AND ck > 5",
    "DELETE FROM {ks}.t WHERE pk = 1",
]


def run_statements(emu: Emulator, session: Any, keyspace: str) -> tuple[TableSchema, list[list[ChangeRecord]]]:
    emu.execute(f"CREATE TYPE {keyspace}.ut (a int, b text)")
    emu.execute(
        f"CREATE TABLE {keyspace}.t (pk int, ck int, s int static, v text, m map<int, text>, l list<int>, u ut,"
        " fu frozen<ut>, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    written = [emu.execute(statement.format(ks=keyspace)) for statement in STATEMENTS]
    stored = read_log(session, keyspace, "t")
    read_back = [[stored[(r.stream_id.raw, r.time.int)] for r in records] for records in written]
    assert sum(map(len, read_back)) == len(stored) == len(STATEMENTS)
    return emu.table(keyspace, "t").schema, read_back


def translate_all(settings: EnvelopeSettings, table: TableSchema, per_statement: list[list[ChangeRecord]]) -> Any:
    translator, wire = Translator(settings), Wire()
    events: list[Any] = []
    dropped: dict[DropReason, int] = defaultdict(int)
    for records in per_statement:
        statement_events = []
        for change in records:
            translation = translator.translate(change, table)
            for reason, count in translation.dropped.items():
                dropped[reason] += count
            for kafka_record in translation.records:
                key, value = wire.check(kafka_record)  # JSON on/off and Avro agree
                statement_events.append(
                    (key, None if value is None else (value["op"], value["before"], value["after"]))
                )
        events.append(statement_events)
    return events, dict(dropped)


CELL_NAMES = ("fu", "l", "l__elements", "m", "m__elements", "s", "u", "u__elements", "v")
CELLS_NULL: dict[str, Any] = dict.fromkeys(CELL_NAMES)
ROW = {"ck": 1, "pk": 1, **CELLS_NULL}
STATIC_ROW = {**ROW, "ck": None}


def test_delta_envelopes_from_real_log_rows(cassandra_session: Any, keyspace: str, emu: Emulator) -> None:
    """Images not requested: after from the delta rows; element changes in `<col>__elements`."""
    table, per_statement = run_statements(emu, cassandra_session, keyspace)
    events, dropped = translate_all(EnvelopeSettings("P"), table, per_statement)
    key = {"ck": 1, "pk": 1}
    assert events[0] == [(key, ("c", None, {**ROW, "m": {"value": [{"key": 1, "value": "x"}]}, "v": {"value": "a"}}))]
    assert events[1] == [(key, ("u", None, {**ROW, "v": {"value": "b"}}))]
    assert events[2] == [({"ck": None, "pk": 1}, ("u", None, {**STATIC_ROW, "s": {"value": 7}}))]
    [(_, (op, _, after))] = events[3]
    assert op == "u" and after["m__elements"] == {"added": [{"key": 2, "value": "y"}], "removed": None}
    list_added = after["l__elements"]["added"]
    assert [cell["value"] for cell in list_added] == [5, 6] and after["l__elements"]["removed"] is None
    assert len({cell["key"] for cell in list_added}) == 2  # each cell keyed by its timeuuid
    assert (after["m"], after["l"]) == (None, None)  # not overwrites
    assert events[4] == [(key, ("u", None, {**ROW, "u__elements": {"added": {"a": 1, "b": None}, "removed": None}}))]
    assert events[5] == [(key, ("u", None, {**ROW, "m__elements": {"added": None, "removed": [1]}}))]
    assert events[6] == [(key, ("u", None, {**ROW, "fu": {"value": {"a": 2, "b": "z"}}, "v": {"value": None}}))]
    assert events[7] == [(key, ("d", ROW, None)), (key, None)]
    assert events[8] == events[9] == []
    assert dropped == {DropReason.RANGE_DELETE: 1, DropReason.CLUSTERED_PARTITION_DELETE: 1}


def test_image_envelopes_from_real_log_rows(cassandra_session: Any, keyspace: str, emu: Emulator) -> None:
    """Pre-images (changed columns) give `before`, post-images (whole row) give `after`."""
    table, per_statement = run_statements(emu, cassandra_session, keyspace)
    settings = EnvelopeSettings("P", experimental_preimages_enabled=True, experimental_postimages_enabled=True)
    events, _ = translate_all(settings, table, per_statement)
    regular_null = {name: {"value": None} for name in ("fu", "l", "m", "u", "v")}
    post = {**ROW, **regular_null}
    assert events[0] == [
        ({"ck": 1, "pk": 1}, ("c", None, {**post, "m": {"value": [{"key": 1, "value": "x"}]}, "v": {"value": "a"}}))
    ]
    [(_, (op, before, after))] = events[1]
    assert op == "u"
    assert before == {**ROW, "v": {"value": "a"}}  # only the column the write touched
    assert after == {**post, "m": {"value": [{"key": 1, "value": "x"}]}, "v": {"value": "b"}}
    [(_, (_, before, after))] = events[2]
    assert (before, after) == (None, {**STATIC_ROW, "s": {"value": 7}})
    [(_, (_, before, after))] = events[3]
    assert before == {**ROW, "m": {"value": [{"key": 1, "value": "x"}]}, "l": {"value": None}}
    assert after["m"] == {"value": [{"key": 1, "value": "x"}, {"key": 2, "value": "y"}]}
    assert after["l"] == {"value": [5, 6]} and after["m__elements"] is None
    [(_, (_, before, after))] = events[4]
    assert before["u"] == {"value": None} and after["u"] == {"value": {"a": 1, "b": None}}
    [(_, (_, _, after))] = events[5]
    assert after["m"] == {"value": [{"key": 2, "value": "y"}]}
    [(_, (op, before, after)), tombstone] = events[7]
    assert (op, after, tombstone) == ("d", None, ({"ck": 1, "pk": 1}, None))
    assert before == {
        **ROW,
        "fu": {"value": {"a": 2, "b": "z"}},
        "l": {"value": [5, 6]},
        "m": {"value": [{"key": 2, "value": "y"}]},
        "u": {"value": {"a": 1, "b": None}},
        "v": {"value": None},
    }
