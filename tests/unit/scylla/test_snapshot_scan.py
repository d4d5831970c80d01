"""The snapshot's chunking (whole partitions, exact resume), its start rule and its time rule."""

from __future__ import annotations

from typing import Any

from bridge.scylla.events import GroupFinished, GroupProgress, GroupRetrying, SnapshotRead
from bridge.scylla.groups import TOKEN_MAX, TOKEN_MIN, GroupId, StreamGroup, TokenRange
from bridge.scylla.positions import Position, SnapshotProgress
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.snapshot_scan import ScanEnd, ScannedRow, SnapshotScan, row_time_us, snapshot_rows, snapshot_start
from bridge.scylla.stream_id import StreamId

GROUP = GroupId("ks", "t", 1_000, "3")
STREAM_US = 5_000_000
SETTINGS = ReaderSettings(snapshot_fetch_size=3, backoff_base_ms=10, backoff_max_ms=100)


def group(*ranges: TokenRange) -> StreamGroup:
    return StreamGroup(GROUP, (StreamId.build(0, 0, 0),), 1_000_000, ranges)


def scanned(token: int, ck: int | None = 0, static: bool = False, write_us: int | None = 10) -> ScannedRow:
    values: dict[str, Any] | None = None if ck is None else {"pk": token, "ck": ck, "v": token * 10 + ck}
    return ScannedRow(token, (token,), values, {"pk": token, "ck": None, "s": 1} if static else None,
                      write_us, write_us, False, False)


def start(*ranges: TokenRange, after: int | None = None, then: ScanEnd = "stream") -> SnapshotScan:
    position = Position(STREAM_US, STREAM_US, None, SnapshotProgress("true", after))
    return SnapshotScan(group(*ranges), position, SETTINGS, then)


def keys(outputs: list[Any]) -> list[tuple[Any, Any]]:
    return [(r.values["pk"], r.values["ck"]) for o in outputs if isinstance(o, SnapshotRead) for r in o.rows]


def test_a_partition_split_over_pages_is_handed_on_whole_and_progress_names_whole_partitions() -> None:
    scan = start(TokenRange(0, 100))
    first = scan.request(0)
    assert first is not None and (first.lower, first.upper, first.paging_state) == (0, 100, None)
    assert scan.holding
    out = scan.on_page(first, [scanned(5), scanned(7, 0), scanned(7, 1)], b"page2")
    assert keys(out) == [(5, 0)]  # token 7 may go on in the next page
    assert scan.holding, "an incremental snapshot's stream must wait until token 7 is whole"
    assert [o.position.snapshot.after_token for o in out if isinstance(o, SnapshotRead)] == [5]
    second = scan.request(0)
    assert second is not None and (second.lower, second.paging_state) == (0, b"page2")  # same query, next page
    out = scan.on_page(second, [scanned(7, 2), scanned(9)], None)
    assert keys(out) == [(7, 0), (7, 1), (7, 2), (9, 0)]
    read = [o for o in out if isinstance(o, SnapshotRead)]
    assert read[-1].position.snapshot == SnapshotProgress("true", 100) and read[-1].fraction == 1.0
    assert isinstance(out[-1], GroupProgress) and out[-1].position == Position.at(STREAM_US)
    assert scan.done and scan.request(0) is None and not scan.holding


def test_a_resume_starts_after_the_last_partition_handed_on_and_skips_finished_ranges() -> None:
    scan = start(TokenRange(TOKEN_MIN - 1, -50), TokenRange(0, 100), TokenRange(200, TOKEN_MAX), after=40)
    request = scan.request(0)
    assert request is not None and (request.lower, request.upper) == (40, 100)
    scan.on_page(request, [scanned(41)], None)
    request = scan.request(0)
    assert request is not None and (request.lower, request.upper) == (200, TOKEN_MAX)


def test_the_wrapping_range_is_read_from_the_first_token() -> None:
    scan = start(TokenRange(TOKEN_MIN - 1, -50))
    request = scan.request(0)
    assert request is not None and (request.lower, request.upper) == (None, -50)


def test_initial_only_finishes_the_group_with_a_completed_snapshot() -> None:
    scan = start(TokenRange(0, 10), then="stop")
    request = scan.request(0)
    assert request is not None
    out = scan.on_page(request, [], None)
    assert isinstance(out[-1], GroupFinished)
    assert out[-1].position.snapshot == SnapshotProgress("true", None, completed=True)
    assert Position.from_offsets_value(out[-1].position.to_offsets_value()) == out[-1].position


def test_a_transient_error_retries_the_same_page_after_a_backoff() -> None:
    scan = start(TokenRange(0, 10))
    request = scan.request(0)
    assert request is not None
    out = scan.on_error(request, TimeoutError("slow"), 1_000)
    assert isinstance(out[0], GroupRetrying)
    assert scan.request(1_000) is None
    again = scan.request(10**9)
    assert again is not None and (again.lower, again.paging_state) == (request.lower, request.paging_state)


def test_a_stale_answer_changes_nothing() -> None:
    scan = start(TokenRange(0, 10), TokenRange(20, 30))
    old = scan.request(0)
    assert old is not None
    scan.on_page(old, [], None)  # the first range is done: a new query
    assert scan.on_page(old, [scanned(3)], None) == []


def test_a_static_row_is_handed_on_once_per_partition_before_its_rows() -> None:
    rows = snapshot_rows([(scanned(1, 0, static=True), 99), (scanned(1, 1, static=True), 99),
                          (scanned(2, None, static=True), 99)], STREAM_US)
    assert [(r.static, r.values["pk"], r.values["ck"]) for r in rows] == [
        (True, 1, None), (False, 1, 0), (False, 1, 1), (True, 2, None)]


def test_a_row_read_over_two_pages_takes_the_time_each_page_was_asked_for() -> None:
    scan = start(TokenRange(0, 100))
    first = scan.request(1_000)
    assert first is not None and first.read_us == 1_000
    listed = ScannedRow(7, (7,), {"pk": 7, "ck": 0}, None, 10, None, True, False)
    assert scan.on_page(first, [listed], b"more") == []  # held: token 7 may go on
    second = scan.request(2_000)
    assert second is not None
    out = scan.on_page(second, [ScannedRow(7, (7,), {"pk": 7, "ck": 1}, None, 10, None, True, False)], None)
    times = [row.ts_us for o in out if isinstance(o, SnapshotRead) for row in o.rows]
    assert times == [1_000, 2_000]  # rows with a list: the read time of their own page


def test_the_time_of_a_snapshot_row() -> None:
    read_us = 9_000_000
    assert row_time_us(7_000_000, False, STREAM_US, read_us) == 7_000_000  # its newest write
    assert row_time_us(1_000_000, False, STREAM_US, read_us) == STREAM_US  # never before the stream position
    assert row_time_us(None, False, STREAM_US, read_us) == read_us  # no cell shows a write time
    assert row_time_us(7_000_000, True, STREAM_US, read_us) == read_us  # a list: appends are not idempotent


def test_which_groups_are_snapshotted_and_from_where() -> None:
    g, now, window_ms = group(TokenRange(0, 10)), 100_000_000, 2_000
    fresh = snapshot_start("initial", g, None, False, now, window_ms, None)
    assert fresh == Position(now - 2_000_000, now - 2_000_000, None, SnapshotProgress("true"))
    assert snapshot_start("no_data", g, None, False, now, window_ms, None) is None
    ended = snapshot_start("initial", g, None, False, now, window_ms, 50_000_000)
    assert ended is not None and ended.window_start_us == 50_000_000  # successors start at its end
    saved = Position.at(90_000_000)
    assert snapshot_start("initial", g, saved, True, now, window_ms, None) is None  # a gap only under when_needed
    assert snapshot_start("when_needed", g, saved, False, now, window_ms, None) is None
    closing = snapshot_start("when_needed", g, saved, True, now, window_ms, None)
    assert closing is not None and closing.snapshot == SnapshotProgress("true")
    running = Position(80, 80, None, SnapshotProgress("true", 4))
    assert snapshot_start("no_data", g, running, False, now, window_ms, None) == running  # a snapshot under way


def test_snapshot_progress_travels_in_the_offsets_value_beside_the_java_fields() -> None:
    position = Position(STREAM_US, STREAM_US, None, SnapshotProgress("incremental", -12345))
    value = position.to_offsets_value()
    assert (value["snapshot"], value["snapshot_after_token"]) == ("incremental", "-12345")
    assert {"window_start", "window_end"} <= value.keys()
    assert Position.from_offsets_value(value) == position
    assert Position.from_offsets_value(Position.at(STREAM_US).to_offsets_value()).snapshot is None


def test_a_table_dropped_while_read_ends_the_snapshot_and_leaves_the_rest_to_the_stream() -> None:
    from cassandra import InvalidRequest

    scan = start(TokenRange(0, 10), TokenRange(20, 30))
    request = scan.request(0)
    assert request is not None
    out = scan.on_error(request, InvalidRequest("unconfigured table snap"), 1)
    assert scan.done and scan.dropped and out == [GroupProgress(GROUP, Position.at(STREAM_US))]


def test_a_result_row_is_decoded_into_its_clustered_and_static_rows_in_the_logs_representation() -> None:
    from bridge.scylla.schema import Column, ColumnKind, TableSchema, parse_cql_type
    from bridge.scylla.snapshot_pages import SnapshotDecoder, keyed_list

    def column(name: str, cql: str, kind: ColumnKind) -> Column:
        return Column(name, parse_cql_type(cql), kind)

    table = TableSchema("ks", "t", (column("pk", "int", ColumnKind.PARTITION_KEY),
                                    column("ck", "int", ColumnKind.CLUSTERING),
                                    column("st", "int", ColumnKind.STATIC),
                                    column("l", "list<int>", ColumnKind.REGULAR),
                                    column("v", "text", ColumnKind.REGULAR)))
    decoder = SnapshotDecoder(table)
    assert decoder.ranged_query == ('SELECT token("pk"), "pk", "ck", "st", "l", "v", WRITETIME("st"), WRITETIME("v") '
                                    'FROM "ks"."t" WHERE token("pk") > ? AND token("pk") <= ?')
    row = decoder.decode((-7, 1, 2, 30, [5, 6], "x", 100, 200))
    assert row.token == -7 and row.partition == (1,)
    assert row.row == {"pk": 1, "ck": 2, "l": keyed_list([5, 6]), "v": "x"}
    assert (row.row_write_us, row.row_has_list) == (200, True)
    assert row.static == {"pk": 1, "ck": None, "st": 30} and (row.static_write_us, row.static_has_list) == (100, False)
    alone = decoder.decode((-7, 1, None, 30, None, None, 100, None))  # a partition with only its static row
    assert alone.row is None and alone.static is not None and alone.row_write_us is None
    assert list(keyed_list([9, 8, 7]).values()) == [9, 8, 7]


def _reference_decode(keys: list[Any], statics: list[Any], regulars: list[Any], row: tuple[Any, ...]) -> ScannedRow:
    """The decoding rule of a result row, column by column (what the generated decoder must do)."""
    from bridge.scylla.snapshot_pages import keyed_list

    values = dict(zip([c.name for c in (*keys, *statics, *regulars)], row[1:], strict=False))
    times = iter(row[1 + len(keys) + len(statics) + len(regulars):])
    partition = [c for c in keys if c.kind.name == "PARTITION_KEY"]

    def part(columns: list[Any]) -> tuple[dict[str, Any], int | None, bool]:
        own, stamps, has_list = {}, [], False
        for column in columns:
            value = values[column.name]
            if column.type.is_multi_cell and column.type.kind == "list" and value is not None:
                value, has_list = keyed_list(value), True
            own[column.name] = value
            if not column.type.is_multi_cell:
                stamps.append(next(times))
        present = [t for t in stamps if t is not None]
        return own, (max(present) if present else None), has_list

    static_values, static_time, static_list = part(statics)
    regular_values, regular_time, regular_list = part(regulars)
    key_values = {c.name: values[c.name] for c in keys}
    clustered = len(keys) == len(partition) or any(values[c.name] is not None for c in keys[len(partition):])
    static = None
    if any(v is not None for v in static_values.values()):
        static = {**key_values, **{c.name: None for c in keys[len(partition):]}, **static_values}
    return ScannedRow(row[0], tuple(values[c.name] for c in partition),
                      {**key_values, **regular_values} if clustered else None, static,
                      regular_time, static_time, regular_list, static_list)


def test_the_generated_decoder_decodes_every_table_shape_as_the_rule_column_by_column() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from bridge.scylla.schema import Column, ColumnKind, TableSchema, parse_cql_type
    from bridge.scylla.snapshot_pages import SnapshotDecoder

    types = st.sampled_from(["int", "text", "list<int>", "set<int>", "frozen<list<int>>", "map<int, int>"])

    @st.composite
    def table_and_rows(draw: Any) -> tuple[TableSchema, list[tuple[Any, ...]]]:
        kinds = ([ColumnKind.PARTITION_KEY] * draw(st.integers(1, 2))
                 + [ColumnKind.CLUSTERING] * draw(st.integers(0, 2)))
        value_kinds = draw(st.lists(st.sampled_from([ColumnKind.STATIC, ColumnKind.REGULAR]), max_size=5))
        if ColumnKind.CLUSTERING not in kinds:
            value_kinds = [ColumnKind.REGULAR for _ in value_kinds]  # statics need a clustering key
        columns = [Column(f"k{i}", parse_cql_type("int"), kind) for i, kind in enumerate(kinds)]
        columns += [Column(f"c{i}", parse_cql_type(draw(types)), kind) for i, kind in enumerate(value_kinds)]
        table = TableSchema("ks", "t", tuple(columns))
        ordered = [*table.partition_key, *table.clustering_key,
                   *[c for c in table.value_columns if c.kind is ColumnKind.STATIC],
                   *[c for c in table.value_columns if c.kind is ColumnKind.REGULAR]]
        timed = [c for c in ordered[len(kinds):] if not c.type.is_multi_cell]

        def value(column: Column) -> Any:
            if column.kind is ColumnKind.PARTITION_KEY:
                return draw(st.integers(0, 9))
            if "list" in str(column.type.kind) or column.type.kind in ("set", "map"):
                return draw(st.none() | st.lists(st.integers(0, 3), min_size=1, max_size=3))
            return draw(st.none() | st.integers(0, 9))

        rows = [(draw(st.integers(-100, 100)), *[value(c) for c in ordered],
                 *[draw(st.none() | st.integers(1, 10**6)) for _ in timed]) for _ in range(draw(st.integers(1, 4)))]
        return table, rows

    @settings(max_examples=300, deadline=None)
    @given(table_and_rows())
    def check(case: tuple[TableSchema, list[tuple[Any, ...]]]) -> None:
        table, rows = case
        keys = [*table.partition_key, *table.clustering_key]
        statics = [c for c in table.value_columns if c.kind is ColumnKind.STATIC]
        regulars = [c for c in table.value_columns if c.kind is ColumnKind.REGULAR]
        decoder = SnapshotDecoder(table)
        for row in rows:
            assert decoder.decode(row) == _reference_decode(keys, statics, regulars, row)

    check()
