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


class _Part:
    """The static or the regular columns of a result row: their values, write times and lists.
    The write-time columns follow one another, so their newest is one `max` over a slice."""

    def __init__(self, columns: list[Column], first: int, first_time: int) -> None:
        self.names = tuple(c.name for c in columns)
        self.values = slice(first, first + len(columns))
        self.count_timed = sum(1 for c in columns if _shows_write_time(c))
        self.times = slice(first_time, first_time + self.count_timed)
        self.lists = tuple(c.name for c in columns if _is_list(c))

    def read(self, row: Sequence[Any]) -> tuple[dict[str, Any], int | None, bool]:
        values = dict(zip(self.names, row[self.values], strict=True))
        has_list = False
        for name in self.lists:
            if values[name] is not None:
                values[name], has_list = keyed_list(values[name]), True
        times = [t for t in row[self.times] if t is not None]
        return values, (max(times) if times else None), has_list


class SnapshotDecoder:
    """The query of one table schema and the decoding of its result rows."""

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        keys = [*table.partition_key, *table.clustering_key]
        statics = [c for c in table.value_columns if c.kind is ColumnKind.STATIC]
        regulars = [c for c in table.value_columns if c.kind is ColumnKind.REGULAR]
        self._pk = len(table.partition_key)
        self._key_names = [c.name for c in keys]
        self._ck = range(1 + self._pk, 1 + len(keys))
        first = 1 + len(keys)
        self._static = _Part(statics, first, first + len(statics) + len(regulars))
        self._regular = _Part(regulars, first + len(statics),
                              first + len(statics) + len(regulars) + self._static.count_timed)
        quoted = [quote_identifier(c.name) for c in (*keys, *statics, *regulars)]
        times = [f"WRITETIME({quote_identifier(c.name)})" for c in (*statics, *regulars) if _shows_write_time(c)]
        token = f"token({', '.join(quote_identifier(c.name) for c in table.partition_key)})"
        select = (f"SELECT {', '.join([token, *quoted, *times])} FROM "
                  f"{quote_identifier(table.keyspace)}.{quote_identifier(table.name)} WHERE {token} ")
        self.ranged_query = f"{select}> ? AND {token} <= ?"
        self.first_range_query = f"{select}<= ?"
        self._has_statics = bool(statics)
        self._clustered = bool(table.clustering_key)

    def decode(self, row: Sequence[Any]) -> ScannedRow:
        keys = dict(zip(self._key_names, row[1:1 + len(self._key_names)], strict=True))
        static: dict[str, Any] | None = None
        static_time, static_list = None, False
        if self._has_statics:
            values, static_time, static_list = self._static.read(row)
            if any(v is not None for v in values.values()):
                static = {**keys, **dict.fromkeys(self._key_names[self._pk:]), **values}
        regular, row_time, row_list = self._regular.read(row)
        clustered = not self._clustered or any(row[i] is not None for i in self._ck)
        return ScannedRow(int(row[0]), tuple(row[1:1 + self._pk]), {**keys, **regular} if clustered else None,
                          static, row_time, static_time, row_list, static_list)


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
