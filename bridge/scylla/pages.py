"""`LogPages`: the CQL side of reading a CDC log table, one page at a time, for the source's scheduler.

    pages = LogPages(session, settings, profile, post=inbox.put)
    future = pages.send(request)        # bind the group's prepared SELECT, send it asynchronously
    pages.watch(request, future)        # its answer is posted as a `PageAnswer` (any thread)
    outputs = pages.outputs(reader, answer, now_us)   # on the scheduler thread: decode, hand over

The scheduler (`reader.py`) decides which pages to ask for and when, holds the in-flight slots
and hands the group readers' outputs on; this module only talks to the driver: the query text,
the prepared statements and row decoders per table, and the freeing of answered futures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from cassandra.query import PreparedStatement

from bridge.scylla import log_schema as cols
from bridge.scylla.errors import MalformedLogError
from bridge.scylla.group_reader import GroupReader, Output, PageRequest
from bridge.scylla.groups import StreamGroup
from bridge.scylla.model import LogRow, Operation
from bridge.scylla.schema import quote_identifier
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId


@dataclass(frozen=True, slots=True)
class PageAnswer:
    """A page query's answer (or error), as the driver's callback reports it."""

    request: PageRequest
    future: Any
    error: BaseException | None
    seconds: float



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

def release_future(future: Any) -> None:
    """Break the reference cycles of an answered query's future, so reference counting frees it
    and its page at once. Each future holds our callbacks (which hold the future) and its request
    timer (whose callback is the future's own method), and it keeps the page's rows: with the
    worker's rare cyclic collections (bridge/worker/tuning.py) those pages piled up, and a catch-up of
    wide rows grew from 191 to 216 MB; released, it stays flat at ~195 MB. `_timer` and
    `_final_result` are the driver's (3.x) own attributes: the future is done and never asked
    again (the next page is a new request), and on a driver without them this sets unused ones."""
    future.clear_callbacks()
    future._timer = None
    future._final_result = None


class LogPages:
    def __init__(
        self, session: Any, settings: ReaderSettings, profile: str, post: Callable[[PageAnswer], None]
    ) -> None:
        self._session = session
        self._settings = settings
        self._profile = profile
        self._post = post
        self._statements: dict[tuple[str, str], PreparedStatement] = {}
        self._decoders: dict[tuple[tuple[str, str], tuple[str, ...]], RowDecoder] = {}

    def send(self, request: PageRequest) -> Any:
        """Send the query of `request` and return the driver's future; raises what binding or
        sending raises."""
        bound = self._statement(request.group).bind((request.stream.raw, request.lower, request.upper))
        bound.fetch_size = self._settings.page_size
        return self._session.execute_async(bound, execution_profile=self._profile, paging_state=request.paging_state)

    def watch(self, request: PageRequest, future: Any) -> None:
        """Post `future`'s answer or error, with the seconds it took from now, when it arrives."""
        started = time.monotonic()
        future.add_callbacks(
            callback=lambda _rows: self._post(PageAnswer(request, future, None, time.monotonic() - started)),
            errback=lambda error: self._post(PageAnswer(request, future, error, time.monotonic() - started)),
        )

    def outputs(self, reader: GroupReader, answer: PageAnswer, now: int) -> list[Output]:
        """Hand `answer` to its group's reader: the page's rows, or the error to retry or fail on."""
        request = answer.request
        if answer.error is not None:
            return reader.on_error(request, answer.error, now)
        try:
            result = answer.future.result()
            decoder = self._decoder(request.group, tuple(result.column_names or ()))
            rows = decoder.decode_page(result.current_rows, request.stream)
        except MalformedLogError as error:
            return [reader.fail(str(error))]
        except Exception as error:
            return reader.on_error(request, error, now)
        paging_state = result.paging_state
        release_future(answer.future)
        return reader.on_page(request, rows, paging_state, now)

    def _statement(self, group: StreamGroup) -> PreparedStatement:
        key = (group.keyspace, group.table)
        statement = self._statements.get(key)
        if statement is None:
            log_table = f"{quote_identifier(group.keyspace)}.{quote_identifier(group.table + '_scylla_cdc_log')}"
            statement = self._session.prepare(
                f'SELECT * FROM {log_table} WHERE "cdc$stream_id" = ? AND "cdc$time" >= ? AND "cdc$time" < ?'
            )
            statement.is_idempotent = True
            self._statements[key] = statement
        return statement

    def _decoder(self, group: StreamGroup, names: tuple[str, ...]) -> RowDecoder:
        key = ((group.keyspace, group.table), names)
        decoder = self._decoders.get(key)
        if decoder is None:
            decoder = RowDecoder(f"{group.keyspace}.{group.table}", names)
            self._decoders[key] = decoder
        return decoder
