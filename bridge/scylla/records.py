"""From driver rows to `LogRow`s to whole `ChangeRecord`s, across page boundaries.

Pure code. The assembler holds the rows of the record it has not seen the end of, so a record
split over two pages is handed on whole once the next page (or the end of the stream's query)
arrives. `cdc$end_of_batch` is checked: a record must end with it, and only its last row may
carry it. Pre/post-image rows are paired with their delta rows by `bridge.scylla.pairing`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bridge.scylla import log_schema as cols
from bridge.scylla.cdc_time import micros_of, timeuuid_sort_key
from bridge.scylla.errors import MalformedLogError
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.stream_id import StreamId

_META = (cols.STREAM_ID, cols.TIME, cols.BATCH_SEQ_NO, cols.OPERATION, cols.TTL, cols.END_OF_BATCH)


class RowDecoder:
    """Turns result tuples with the given column names into `LogRow`s."""

    def __init__(self, table: str, column_names: Sequence[str]) -> None:
        self._table = table
        self.column_names = tuple(column_names)
        missing = [name for name in _META if name not in self.column_names]
        if missing:
            raise MalformedLogError(f"log table of {table} lacks the columns {missing}")
        self._meta = tuple(self.column_names.index(name) for name in _META)
        self._values = tuple((i, n) for i, n in enumerate(self.column_names) if n not in _META)

    def decode(self, row: Sequence[Any]) -> LogRow:
        s, t, q, o, ttl, eob = (row[i] for i in self._meta)
        try:
            operation = Operation(o)
            stream = StreamId(bytes(s))
        except ValueError as error:
            raise MalformedLogError(
                f"{self._table}: bad log row at stream {bytes(s).hex()}, cdc$time {t}, seq {q}: {error}"
            ) from error
        return LogRow(
            stream_id=stream,
            time=t,
            batch_seq_no=int(q),
            operation=operation,
            ttl=ttl,
            end_of_batch=bool(eob),
            values={name: row[i] for i, name in self._values},
        )


def _where(table: str, row: LogRow) -> str:
    micros = micros_of(row.time)
    return f"{table}: stream {row.stream_id}, cdc$time {row.time} (µs {micros}), seq {row.batch_seq_no}"


class RecordAssembler:
    """Groups the rows of one stream, in (`cdc$time`, seq) order, into records. Every record
    must end with `cdc$end_of_batch`; sequence numbers need not start at 0, because a resume
    in the middle of a record hands on the rest of it."""

    def __init__(self, keyspace: str, table: str) -> None:
        self._keyspace = keyspace
        self._table = table
        self._pending: list[LogRow] = []
        self._previous: LogRow | None = None
        self._previous_key: tuple[tuple[int, int], int] | None = None

    @property
    def pending_rows(self) -> int:
        return len(self._pending)

    def add(self, rows: Iterable[LogRow]) -> list[ChangeRecord]:
        """Records completed by these rows (the last, unfinished one stays pending)."""
        done: list[ChangeRecord] = []
        for row in rows:
            self._check_order(row)
            if self._pending and self._pending[-1].time != row.time:
                where = _where(self._table, self._pending[-1])
                raise MalformedLogError(f"record without cdc$end_of_batch before the next one: {where}")
            self._pending.append(row)
            if row.end_of_batch:
                done.append(ChangeRecord(self._keyspace, self._table, tuple(self._pending)))
                self._pending = []
        return done

    def finish(self) -> None:
        """The stream's query is exhausted: no record may be left open."""
        if self._pending:
            where = _where(self._table, self._pending[-1])
            raise MalformedLogError(f"record without cdc$end_of_batch at the end of the read: {where}")

    def _check_order(self, row: LogRow) -> None:
        key = (timeuuid_sort_key(row.time), row.batch_seq_no)
        previous, before = self._previous, self._previous_key
        self._previous, self._previous_key = row, key
        if previous is None or before is None:
            return
        if row.stream_id != previous.stream_id:
            raise MalformedLogError(f"rows of two streams in one stream read: {_where(self._table, row)}")
        if key <= before:
            raise MalformedLogError(f"log rows out of order: {_where(self._table, row)}")
