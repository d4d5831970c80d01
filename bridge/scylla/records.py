"""From `LogRow`s (decoded by `pages.py`) to whole `ChangeRecord`s, across page boundaries.

Pure code. The assembler holds the rows of the record it has not seen the end of, so a record
split over two pages is handed on whole once the next page (or the end of the stream's query)
arrives. `cdc$end_of_batch` is checked: a record must end with it, and only its last row may
carry it. Pre/post-image rows are paired with their delta rows by `bridge.scylla.pairing`.
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge.scylla.cdc_time import micros_of, timeuuid_sort_key
from bridge.scylla.errors import MalformedLogError
from bridge.scylla.model import ChangeRecord, LogRow


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
