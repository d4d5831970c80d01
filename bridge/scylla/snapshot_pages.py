"""`SnapshotPages`: the CQL side of a snapshot, one page of a group's token range at a time.

    pages = SnapshotPages(session, settings, profile, post=inbox.put)
    future = pages.send(request)       # the table's SELECT over one token range, asynchronously
    pages.watch(request, future)       # its answer is posted as a `ScanAnswer` (any thread)
    rows, paging_state = pages.rows(answer)   # on the scheduler thread: decoded `ScannedRow`s

The query reads every column and the write time of every column that shows one
(`WRITETIME`: not non-frozen collections or UDTs), partitions in token order:
`SELECT token(pk), pk.., ck.., static.., regular.., WRITETIME(..).. FROM ks.t
 WHERE token(pk) > ? AND token(pk) <= ?`. Values are put in the CDC log's representation, so
the post-image translation serves the snapshot's rows too: a non-frozen list, which the log keeps
as `map<timeuuid, V>`, gets keys in list order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.query import PreparedStatement

from bridge.scylla.cdc_time import min_timeuuid
from bridge.scylla.pages import release_future
from bridge.scylla.schema import Column, ColumnKind, TableSchema, quote_identifier
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.snapshot_scan import ScannedRow, ScanRequest
from bridge.scylla.table_schema import load_table_schema


@dataclass(frozen=True, slots=True)
class ScanAnswer:
    request: ScanRequest
    future: Any
    error: BaseException | None
    seconds: float


def _is_list(column: Column) -> bool:
    return column.type.is_multi_cell and column.type.kind == "list"


def _shows_write_time(column: Column) -> bool:
    return not column.type.is_multi_cell


def keyed_list(values: Sequence[Any]) -> dict[Any, Any]:
    """A list as the log holds it: keys in list order (the real keys cannot be read)."""
    return {min_timeuuid(index): value for index, value in enumerate(values)}


def newest(times: Sequence[int | None]) -> int | None:
    """The newest of the write times that are there (None: no cell shows one)."""
    try:
        return max(times)  # type: ignore[type-var]  # every cell written: the common case, in C
    except TypeError:  # a None among them
        return max((t for t in times if t is not None), default=None)


def _decode_source(keys: list[Column], statics: list[Column], regulars: list[Column]) -> list[str]:
    """`decode(row)` of a result row laid out as the query (`SnapshotDecoder`) selects it:
    `token, keys.., statics.., regulars.., write times of statics.., of regulars..`. Straight-line
    code per table, as the envelope's row builders (`bridge/envelope/row_code.py`): the loop over
    columns with a dict per part and two merges cost three times as much per row. Names appear
    as repr() literals only."""
    index = iter(range(1, 1 + len(keys) + len(statics) + len(regulars)))
    key_fields = [f"{c.name!r}: row[{next(index)}]" for c in keys]
    static_fields = [f"{c.name!r}: row[{next(index)}]" for c in statics]
    regular_fields = [f"{c.name!r}: row[{next(index)}]" for c in regulars]
    partition_size = sum(1 for c in keys if c.kind is ColumnKind.PARTITION_KEY)
    first_time = 1 + len(keys) + len(statics) + len(regulars)
    static_times = sum(1 for c in statics if _shows_write_time(c))
    regular_times = sum(1 for c in regulars if _shows_write_time(c))
    clustering = [f"row[{1 + i}] is not None" for i in range(partition_size, len(keys))]
    lines = ["def decode(row):"]

    def part(name: str, columns: list[Column], fields: list[str], first: int, timed: int) -> None:
        lines.append(f"    {name} = {{{', '.join(fields)}}}")
        lists = [c.name for c in columns if _is_list(c)]
        lines.append(f"    {name}_list = False")
        for list_name in lists:
            lines.extend([f"    if {name}[{list_name!r}] is not None:",
                          f"        {name}[{list_name!r}], {name}_list = keyed_list({name}[{list_name!r}]), True"])
        lines.append(f"    {name}_time = newest(row[{first}:{first + timed}])" if timed else f"    {name}_time = None")

    part("regular", regulars, [*key_fields, *regular_fields], first_time + static_times, regular_times)
    if clustering:
        lines.append(f"    if not ({' or '.join(clustering)}):")
        lines.append("        regular = None")
    if statics:
        cleared = [f"{c.name!r}: None" for c in keys[partition_size:]]
        part("static", statics, [*key_fields[:partition_size], *cleared, *static_fields], first_time, static_times)
        values = " or ".join(f"row[{1 + len(keys) + i}] is not None" for i in range(len(statics)))
        lines += [f"    if not ({values}):", "        static = None"]
    else:
        lines += ["    static, static_time, static_list = None, None, False"]
    partition = ", ".join(f"row[{1 + i}]" for i in range(partition_size))
    lines.append(f"    return ScannedRow(int(row[0]), ({partition},), regular, static, regular_time, static_time, "
                 "regular_list, static_list)")
    return lines


class SnapshotDecoder:
    """The query of one table schema and the decoding of its result rows."""

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        keys = [*table.partition_key, *table.clustering_key]
        statics = [c for c in table.value_columns if c.kind is ColumnKind.STATIC]
        regulars = [c for c in table.value_columns if c.kind is ColumnKind.REGULAR]
        quoted = [quote_identifier(c.name) for c in (*keys, *statics, *regulars)]
        times = [f"WRITETIME({quote_identifier(c.name)})" for c in (*statics, *regulars) if _shows_write_time(c)]
        token = f"token({', '.join(quote_identifier(c.name) for c in table.partition_key)})"
        select = (f"SELECT {', '.join([token, *quoted, *times])} FROM "
                  f"{quote_identifier(table.keyspace)}.{quote_identifier(table.name)} WHERE {token} ")
        self.ranged_query = f"{select}> ? AND {token} <= ?"
        self.first_range_query = f"{select}<= ?"
        namespace: dict[str, Any] = {"ScannedRow": ScannedRow, "keyed_list": keyed_list, "newest": newest}
        source = "\n".join(_decode_source(keys, statics, regulars)) + "\n"
        # our generator's text; column names only appear as repr() literals
        exec(compile(source, f"<snapshot decoder of {table.qualified_name}>", "exec"), namespace)  # noqa: S102
        self.decode: Callable[[Sequence[Any]], ScannedRow] = namespace["decode"]


class SnapshotPages:
    def __init__(self, session: Any, settings: ReaderSettings, profile: str,
                 post: Callable[[ScanAnswer], None]) -> None:
        self._session = session
        self._settings = settings
        self._profile = profile
        self._post = post
        self._tables: dict[tuple[str, str], tuple[SnapshotDecoder, PreparedStatement, PreparedStatement]] = {}

    def send(self, request: ScanRequest) -> Any:
        """Send the page of `request`; raises what loading the schema, preparing or sending raises."""
        _, ranged, from_first = self._table(request.group.keyspace, request.group.table)
        if request.lower is None:
            bound = from_first.bind((request.upper,))
        else:
            bound = ranged.bind((request.lower, request.upper))
        bound.fetch_size = self._settings.snapshot_fetch_size
        return self._session.execute_async(bound, execution_profile=self._profile,
                                           paging_state=request.paging_state)

    def watch(self, request: ScanRequest, future: Any) -> None:
        started = time.monotonic()
        future.add_callbacks(
            callback=lambda _rows: self._post(ScanAnswer(request, future, None, time.monotonic() - started)),
            errback=lambda error: self._post(ScanAnswer(request, future, error, time.monotonic() - started)),
        )

    def rows(self, answer: ScanAnswer) -> tuple[list[ScannedRow], bytes | None]:
        """The answer's rows and the paging state of the next page (None: the range is read)."""
        decoder = self._table(answer.request.group.keyspace, answer.request.group.table)[0]
        result = answer.future.result()
        rows = [decoder.decode(row) for row in result.current_rows]
        paging_state = result.paging_state
        release_future(answer.future)
        return rows, paging_state

    def _table(self, keyspace: str, table: str) -> tuple[SnapshotDecoder, PreparedStatement, PreparedStatement]:
        known = self._tables.get((keyspace, table))
        if known is None:
            decoder = SnapshotDecoder(load_table_schema(self._session, keyspace, table))
            ranged = self._session.prepare(decoder.ranged_query)
            from_first = self._session.prepare(decoder.first_range_query)
            for statement in (ranged, from_first):
                statement.is_idempotent = True
            known = self._tables[(keyspace, table)] = (decoder, ranged, from_first)
        return known
