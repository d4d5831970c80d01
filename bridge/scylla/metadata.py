"""Queries on the stream metadata tables and the table options (I/O only, no decisions).

Vnodes (`<vnodes keyspace>.cdc_generation_timestamps` / `cdc_streams_descriptions_v2`) are
queried with the point queries of the official libraries; tablets
(`<tablets keyspace>.cdc_timestamps` / `cdc_streams`) per table, reading only the closed/opened
delta of each new stream set. Metadata reads use consistency ONE on a one-node cluster and
QUORUM otherwise (the streams are published before their timestamp, so once a timestamp is
visible at QUORUM so are its streams).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import PreparedStatement

from bridge.scylla.errors import ErrorKind, classify
from bridge.scylla.schema import quote_identifier
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from bridge.scylla.topology import Generation, StreamSetDelta, VnodeRange

_EPOCH = dt.datetime(1970, 1, 1)  # noqa: DTZ001 (the driver's timestamps are naive UTC datetimes)
STATE_CURRENT, STATE_CLOSED, STATE_OPENED = 0, 1, 2
DEFAULT_CDC_TTL_S = 86_400

Acquire = Callable[[], None]


def millis_of(value: dt.datetime | int) -> int:
    """A `timestamp` cell as ms since the epoch (the driver returns naive UTC datetimes)."""
    if isinstance(value, int):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
    return int((micros + 500) // 1000)


class MetadataQueries:
    """Synchronous metadata reads; `limit` wraps each in the process-wide in-flight bound."""

    def __init__(self, session: Any, settings: ReaderSettings, profile: str, limit: Any) -> None:
        self._session = session
        self._profile = profile
        self._limit = limit
        self._prepared: dict[str, PreparedStatement] = {}
        vks = quote_identifier(settings.vnodes_metadata_keyspace)
        tks = quote_identifier(settings.tablets_metadata_keyspace)
        self._tablets_keyspace = settings.tablets_metadata_keyspace
        self._q = {
            "gen_at": f"SELECT time FROM {vks}.cdc_generation_timestamps WHERE key = 'timestamps' "
            "AND time <= ? ORDER BY time DESC LIMIT 1",
            "gen_next": f"SELECT time FROM {vks}.cdc_generation_timestamps WHERE key = 'timestamps' "
            "AND time > ? ORDER BY time ASC LIMIT 1",
            "gen_streams": f"SELECT range_end, streams FROM {vks}.cdc_streams_descriptions_v2 WHERE time = ?",
            "set_at": f"SELECT timestamp FROM {tks}.cdc_timestamps WHERE keyspace_name = ? AND table_name = ? "
            "AND timestamp <= ? ORDER BY timestamp DESC LIMIT 1",
            "set_next": f"SELECT timestamp FROM {tks}.cdc_timestamps WHERE keyspace_name = ? AND table_name = ? "
            "AND timestamp > ? ORDER BY timestamp ASC LIMIT 1",
            "set_until": f"SELECT timestamp FROM {tks}.cdc_timestamps WHERE keyspace_name = ? AND table_name = ? "
            "AND timestamp <= ?",
            "set_any": f"SELECT timestamp FROM {tks}.cdc_timestamps WHERE keyspace_name = ? AND table_name = ? LIMIT 1",
            "streams_in_state": f"SELECT stream_id FROM {tks}.cdc_streams WHERE keyspace_name = ? "
            "AND table_name = ? AND timestamp = ? AND stream_state = ?",
            "delta": f"SELECT stream_state, stream_id FROM {tks}.cdc_streams WHERE keyspace_name = ? "
            "AND table_name = ? AND timestamp = ? AND stream_state >= 1 AND stream_state <= 2",
        }

    # ------------------------------------------------------------------ plumbing

    def _consistency(self) -> int:
        hosts = self._session.cluster.metadata.all_hosts()
        return int(ConsistencyLevel.ONE if len(hosts) <= 1 else ConsistencyLevel.QUORUM)

    def _statement(self, name: str) -> PreparedStatement:
        statement = self._prepared.get(name)
        if statement is None:
            statement = self._session.prepare(self._q[name])
            self._prepared[name] = statement
        return statement

    def _rows(self, name: str, params: Sequence[Any]) -> list[Any]:
        bound = self._statement(name).bind(params)
        bound.consistency_level = self._consistency()
        with self._limit:
            return list(self._session.execute(bound, execution_profile=self._profile))

    def _one_time(self, name: str, params: Sequence[Any]) -> int | None:
        rows = self._rows(name, params)
        return millis_of(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ vnodes

    def generation_at(self, at_ms: int) -> int | None:
        """The generation operating at `at_ms` (the newest one starting at or before it)."""
        return self._one_time("gen_at", (at_ms,))

    def next_generation(self, after_ms: int) -> int | None:
        return self._one_time("gen_next", (after_ms,))

    def generation(self, start_ms: int) -> Generation:
        rows = self._rows("gen_streams", (start_ms,))
        ranges = tuple(VnodeRange(int(r[0]), tuple(StreamId(bytes(s)) for s in r[1] or ())) for r in rows)
        return Generation(start_ms, ranges)

    # ------------------------------------------------------------------ tablets

    def uses_tablets(self, keyspace: str, table: str) -> bool:
        """A table is tablet-based when the tablet metadata lists a stream set for it; a cluster
        without those tables (vnodes only) answers no."""
        try:
            return bool(self._rows("set_any", (keyspace, table)))
        except Exception as error:
            if classify(error) is ErrorKind.TRANSIENT:
                raise
            return False

    def stream_set_at(self, keyspace: str, table: str, at_ms: int) -> int | None:
        return self._one_time("set_at", (keyspace, table, at_ms))

    def next_stream_set(self, keyspace: str, table: str, after_ms: int) -> int | None:
        return self._one_time("set_next", (keyspace, table, after_ms))

    def stream_sets_until(self, keyspace: str, table: str, at_ms: int) -> list[int]:
        return sorted(millis_of(r[0]) for r in self._rows("set_until", (keyspace, table, at_ms)))

    def streams(self, keyspace: str, table: str, at_ms: int, state: int) -> list[StreamId]:
        rows = self._rows("streams_in_state", (keyspace, table, at_ms, state))
        return [StreamId(bytes(r[0])) for r in rows]

    def delta(self, keyspace: str, table: str, at_ms: int) -> StreamSetDelta:
        closed: set[StreamId] = set()
        opened: set[StreamId] = set()
        for state, stream in self._rows("delta", (keyspace, table, at_ms)):
            (closed if state == STATE_CLOSED else opened).add(StreamId(bytes(stream)))
        return StreamSetDelta(at_ms, frozenset(closed), frozenset(opened))

    # ------------------------------------------------------------------ table options

    def cdc_ttl_s(self, keyspace: str, table: str) -> int:
        """The log TTL from the table's `cdc` options: ScyllaDB keeps them in
        `system_schema.scylla_tables`; the emulator keeps a copy in the tablets keyspace."""
        for options_keyspace in ("system_schema", self._tablets_keyspace):
            query = (
                f"SELECT * FROM {quote_identifier(options_keyspace)}.scylla_tables "
                "WHERE keyspace_name = %s AND table_name = %s"
            )
            try:
                with self._limit:
                    result = self._session.execute(query, (keyspace, table), execution_profile=self._profile)
                    names, rows = list(result.column_names or ()), list(result)
            except Exception as error:
                if classify(error) is ErrorKind.TRANSIENT:
                    raise
                continue
            if rows and "cdc" in names:
                options = rows[0][names.index("cdc")] or {}
                if "ttl" in options:
                    return int(options["ttl"])
        return DEFAULT_CDC_TTL_S

    def log_columns(self, keyspace: str, table: str) -> list[str] | None:
        """Column names of the log table from the driver's schema metadata, None if absent."""
        ks = self._session.cluster.metadata.keyspaces.get(keyspace)
        log = None if ks is None else ks.tables.get(f"{table}_scylla_cdc_log")
        return None if log is None else list(log.columns)

    def primary_key(self, keyspace: str, table: str) -> list[str] | None:
        ks = self._session.cluster.metadata.keyspaces.get(keyspace)
        base = None if ks is None else ks.tables.get(table)
        return None if base is None else [c.name for c in base.primary_key]
