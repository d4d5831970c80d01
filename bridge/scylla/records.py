"""From driver rows to `LogRow`s to whole `ChangeRecord`s, across page boundaries.

Pure code. The assembler holds the rows of the record it has not seen the end of, so a record
split over two pages is handed on whole once the next page (or the end of the stream's query)
arrives. `cdc$end_of_batch` is checked: a record must end with it, and only its last row may
carry it. Pre/post-image rows are paired with their delta rows by `bridge.scylla.pairing`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

from bridge.scylla import log_schema as cols
from bridge.scylla.cdc_time import micros_of, timeuuid_sort_key
from bridge.scylla.errors import MalformedLogError
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge.scylla.stream_id import StreamId

_META = (cols.STREAM_ID, cols.TIME, cols.BATCH_SEQ_NO, cols.OPERATION, cols.TTL, cols.END_OF_BATCH)
# A dict lookup instead of calling the enum (which looks the value up and raises): per log row.
_OPERATIONS = {operation.value: operation for operation in Operation}


class RowDecoder:
    """Turns result tuples with the given column names into `LogRow`s."""

    def __init__(self, table: str, column_names: Sequence[str]) -> None:
        self._table = table
        self.column_names = tuple(column_names)
        missing = [name for name in _META if name not in self.column_names]
        if missing:
            raise MalformedLogError(f"log table of {table} lacks the columns {missing}")
        self._meta = itemgetter(*(self.column_names.index(name) for name in _META))
        value_columns = [(i, n) for i, n in enumerate(self.column_names) if n not in _META]
        self._value_names = tuple(n for _, n in value_columns)
        # itemgetter of one index gives the value itself, of several a tuple: always a tuple.
        indexes = [i for i, _ in value_columns]
        self._values: Callable[[Sequence[Any]], Sequence[Any]] = (
            itemgetter(*indexes) if len(indexes) > 1 else lambda row: tuple(row[i] for i in indexes))

    def decode(self, row: Sequence[Any]) -> LogRow:
        return self.decode_page([row])[0]

    def decode_page(self, rows: Iterable[Sequence[Any]], stream: StreamId | None = None) -> list[LogRow]:
        """The rows of one page; `stream`, the stream the page was read from, is shared by every
        row that carries its id (one object per page instead of one per row; a row of another
        stream gets its own, for the assembler to refuse)."""
        meta, values, names, operations = self._meta, self._values, self._value_names, _OPERATIONS
        decoded: list[LogRow] = []
        for row in rows:
            s, t, q, o, ttl, eob = meta(row)
            operation = operations.get(o)
            stream_id = stream if stream is not None and s == stream.raw else self._stream(s, t, q)
            if operation is None:
                raise MalformedLogError(f"{self._table}: bad log row at stream {bytes(s).hex()}, cdc$time {t}, "
                                        f"seq {q}: {o!r} is not a valid Operation")
            cells = dict(zip(names, values(row), strict=True))
            decoded.append(LogRow(stream_id, t, int(q), operation, ttl, bool(eob), cells))
        return decoded

    def _stream(self, raw: Any, time: Any, seq: Any) -> StreamId:
        try:
            return StreamId(bytes(raw))
        except (TypeError, ValueError) as error:
            raise MalformedLogError(
                f"{self._table}: bad log row at stream {bytes(raw).hex()}, cdc$time {time}, seq {seq}: {error}"
            ) from error


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
        keyspace, table = self._keyspace, self._table
        pending, previous, before = self._pending, self._previous, self._previous_key
        try:
            for row in rows:
                key = (timeuuid_sort_key(row.time), row.batch_seq_no)
                if previous is not None and before is not None:
                    # One object per page and stream (`RowDecoder.decode_page`): `is` is the
                    # common answer, the comparison the exact one.
                    if row.stream_id is not previous.stream_id and row.stream_id != previous.stream_id:
                        raise MalformedLogError(f"rows of two streams in one stream read: {_where(table, row)}")
                    if key <= before:
                        raise MalformedLogError(f"log rows out of order: {_where(table, row)}")
                    if pending and key[0] != before[0]:  # pending rows are the rows just before this one
                        where = _where(table, pending[-1])
                        raise MalformedLogError(f"record without cdc$end_of_batch before the next one: {where}")
                previous, before = row, key
                pending.append(row)
                if row.end_of_batch:
                    done.append(ChangeRecord(keyspace, table, tuple(pending)))
                    pending.clear()
        finally:
            self._previous, self._previous_key = previous, before
        return done

    def finish(self) -> None:
        """The stream's query is exhausted: no record may be left open."""
        if self._pending:
            where = _where(self._table, self._pending[-1])
            raise MalformedLogError(f"record without cdc$end_of_batch at the end of the read: {where}")
