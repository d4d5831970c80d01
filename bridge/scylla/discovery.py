"""Discovery: which groups exist for each watched table, and when they end. Runs on its own
thread and polls the metadata every `metadata_poll_interval_ms`.

Each table is classified on its own (tablet-based when the tablet metadata lists it, otherwise
vnode-based), so one process reads both kinds together. Discovery starts at the generation or
stream set operating at the table's start time and then follows every later one, reporting new
groups, the ends of old ones and a horizon: the wall-clock time of the last complete poll, past
which no group may read, so a switch published late is never read across.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from bridge.scylla.backoff import Backoff
from bridge.scylla.errors import ErrorKind, classify, describe
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.metadata import STATE_CURRENT, STATE_OPENED, MetadataQueries
from bridge.scylla.positions import default_start_us
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from bridge.scylla.topology import Generation, TabletTopology, vnode_groups

log = structlog.get_logger(__name__)
MS = 1000


class DiscoverySink(Protocol):
    def groups_found(self, groups: list[StreamGroup], ttl_s: int, key_columns: list[str]) -> None: ...
    def ends_found(self, ends: dict[GroupId, int]) -> None: ...
    def horizon(self, keyspace: str, table: str, horizon_us: int) -> None: ...
    def discovery_failed(self, keyspace: str, table: str, message: str) -> None: ...


@dataclass(slots=True)
class _Watched:
    keyspace: str
    table: str
    since_ms: int | None
    tablets: bool | None = None
    ttl_s: int = 0
    key_columns: list[str] = field(default_factory=list)
    generation_ms: int | None = None
    vnode_groups: list[StreamGroup] = field(default_factory=list)
    topology: TabletTopology | None = None
    missing_since: float | None = None
    backoff: Backoff | None = None
    retry_at: float = 0.0


class Discovery:
    def __init__(
        self,
        queries: MetadataQueries,
        settings: ReaderSettings,
        sink: DiscoverySink,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._queries = queries
        self._settings = settings
        self._sink = sink
        self._clock = clock
        self._tables: dict[tuple[str, str], _Watched] = {}
        self._generations: dict[int, Generation] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="cdc-discovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def watch(self, keyspace: str, table: str, since_ms: int | None) -> None:
        """Follow `table` from the generation or stream set operating at `since_ms` (None: at the
        default start, `now - lookback` or `now - log TTL`)."""
        with self._lock:
            self._tables.setdefault((keyspace, table), _Watched(keyspace, table, since_ms))
        self._wake.set()

    def _run(self) -> None:
        interval = self._settings.metadata_poll_interval_ms / 1000
        while not self._stopping:
            self.poll_once()
            self._wake.wait(interval)
            self._wake.clear()

    def poll_once(self) -> None:
        """One round over every watched table (also called directly by tests)."""
        with self._lock:
            tables = list(self._tables.values())
        for watched in tables:
            if self._stopping or self._clock() < watched.retry_at:
                continue
            started_us = int(self._clock() * 1_000_000)
            try:
                horizon = self._step(watched, started_us)
            except Exception as error:
                self._on_error(watched, error)
                continue
            watched.backoff = None
            if horizon is not None:
                self._sink.horizon(watched.keyspace, watched.table, horizon)

    def _on_error(self, watched: _Watched, error: BaseException) -> None:
        name = f"{watched.keyspace}.{watched.table}"
        if classify(error) is ErrorKind.FATAL:
            self._drop(watched, f"discovery for {name} failed: {describe(error)}")
            return
        watched.backoff = watched.backoff or Backoff(self._settings.backoff_base_ms, self._settings.backoff_max_ms)
        delay = watched.backoff.next_delay_ms()
        watched.retry_at = self._clock() + delay / 1000
        log.warning("cdc metadata read failed, retrying", keyspace=watched.keyspace, table=watched.table,
                    error=describe(error), delay_ms=round(delay))

    def _drop(self, watched: _Watched, message: str) -> None:
        with self._lock:
            self._tables.pop((watched.keyspace, watched.table), None)
        self._sink.discovery_failed(watched.keyspace, watched.table, message)

    def _step(self, watched: _Watched, started_us: int) -> int | None:
        if watched.tablets is None and not self._classify(watched):
            return None
        if watched.tablets:
            return self._step_tablets(watched, started_us)
        return self._step_vnodes(watched, started_us)

    def _classify(self, watched: _Watched) -> bool:
        queries, ks, table = self._queries, watched.keyspace, watched.table
        if queries.log_columns(ks, table) is None or queries.primary_key(ks, table) is None:
            now = self._clock()
            watched.missing_since = watched.missing_since or now
            if (now - watched.missing_since) * 1000 >= self._settings.missing_table_timeout_ms:
                self._drop(watched, f"{ks}.{table} or its CDC log table {table}_scylla_cdc_log does not exist")
            return False
        watched.key_columns = queries.primary_key(ks, table) or []
        watched.ttl_s = queries.cdc_ttl_s(ks, table)
        watched.tablets = queries.uses_tablets(ks, table)
        if watched.since_ms is None:
            now_us = int(self._clock() * 1_000_000)
            lookback = self._settings.initial_lookback_ms
            watched.since_ms = max(0, default_start_us(now_us, watched.ttl_s, lookback) // MS)
        log.info("cdc table watched", keyspace=ks, table=table, tablets=watched.tablets, ttl_s=watched.ttl_s)
        return True

    def _generation(self, start_ms: int) -> Generation:
        generation = self._generations.get(start_ms)
        if generation is None or not generation.ranges:
            generation = self._queries.generation(start_ms)
            self._generations[start_ms] = generation
        return generation

    def _step_vnodes(self, watched: _Watched, started_us: int) -> int | None:
        queries = self._queries
        if watched.generation_ms is None:
            assert watched.since_ms is not None
            first = queries.generation_at(watched.since_ms) or queries.next_generation(watched.since_ms)
            if first is None:
                return None
            generation = self._generation(first)
            if not generation.ranges:
                return min(started_us, first * MS)
            watched.generation_ms = first
            watched.vnode_groups = vnode_groups(watched.keyspace, watched.table, generation)
            self._sink.groups_found(watched.vnode_groups, watched.ttl_s, watched.key_columns)
        while True:
            current = watched.generation_ms
            following = queries.next_generation(current)
            if following is None:
                return started_us
            generation = self._generation(following)
            if not generation.ranges:
                # A timestamp whose streams are not visible yet: wait, and read nothing past it.
                log.warning("cdc generation without streams, waiting", keyspace=watched.keyspace,
                            table=watched.table, generation_ms=following)
                return min(started_us, following * MS)
            new_groups = vnode_groups(watched.keyspace, watched.table, generation, watched.vnode_groups)
            self._sink.ends_found({g.id: following * MS for g in watched.vnode_groups})
            self._sink.groups_found(new_groups, watched.ttl_s, watched.key_columns)
            watched.generation_ms, watched.vnode_groups = following, new_groups

    def _step_tablets(self, watched: _Watched, started_us: int) -> int | None:
        queries, ks, table = self._queries, watched.keyspace, watched.table
        if watched.topology is None:
            assert watched.since_ms is not None
            first = queries.stream_set_at(ks, table, watched.since_ms) or queries.next_stream_set(
                ks, table, watched.since_ms
            )
            if first is None:
                return None
            current = queries.streams(ks, table, first, STATE_CURRENT)
            opened: dict[StreamId, int] = {}
            for earlier in queries.stream_sets_until(ks, table, first):
                for stream in queries.streams(ks, table, earlier, STATE_OPENED):
                    opened[stream] = earlier
            topology = TabletTopology(ks, table)
            live = set(current)
            change = topology.load(first, current, {s: t for s, t in opened.items() if s in live})
            watched.topology = topology
            self._sink.groups_found(list(change.started), watched.ttl_s, watched.key_columns)
        topology = watched.topology
        while True:
            assert topology.timestamp_ms is not None
            following = queries.next_stream_set(ks, table, topology.timestamp_ms)
            if following is None:
                return started_us
            change = topology.apply(queries.delta(ks, table, following))
            self._sink.ends_found(dict(change.ended))
            self._sink.groups_found(list(change.started), watched.ttl_s, watched.key_columns)
