"""Which stream a write goes to, ScyllaDB's timestamp rules, and changes of the stream layout
(vnode generations, tablet stream sets). Keeps what it read from the metadata tables and looks
for what other processes published every `generation_refresh_s`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import streams as st
from bridge_devstack.sim.errors import InvalidRequestError, ServerError
from bridge_devstack.sim.metadata import MetadataStore
from bridge_devstack.sim.settings import SimSettings

# ScyllaDB's generation leeway: writes may be this far in the future (and in the near past).
LEEWAY_US = 5_000_000
# A tablets table's first stream set starts this long before the table was created.
TABLETS_FIRST_SET_OFFSET_MS = 5_000


def format_timestamp(micros: int) -> str:
    moment = datetime.fromtimestamp(micros / 1_000_000, UTC)
    return f"{moment:%Y/%m/%d %H:%M:%S}.{micros % 1_000_000:06d} ({micros})"


def future_error(ts: int, now: int) -> InvalidRequestError:
    return InvalidRequestError(
        f'cdc: attempted to get a stream "from the future" ({format_timestamp(ts)}; current server time:'
        f" {format_timestamp(now)}). With CDC you cannot send writes with timestamps arbitrarily into the future,"
        " because we don't know what streams will be used at that time.\nWe *do* allow sending writes into the"
        " near future, but our ability to do that is limited. If you really must use your own timestamps, then"
        " make sure your clocks are well-synchronized with the database's clocks."
    )


def past_error(ts: int, now: int) -> InvalidRequestError:
    return InvalidRequestError(
        f'cdc: attempted to get a stream "from the past" ({format_timestamp(ts)}; current server time:'
        f" {format_timestamp(now)}). With CDC you cannot send writes with timestamps too far into the past,"
        " because that would break consistency properties.\nWe *do* allow sending writes into the near past,"
        " but our ability to do that is limited. Are you using client-side timestamps? Make sure your clocks"
        " are well-synchronized with the database's clocks."
    )


def check_vnode_timestamp(ts: int, now: int, starts_us: list[int]) -> None:
    """ScyllaDB's `cdc::metadata::get_stream` checks; `starts_us` sorted ascending."""
    if ts > now + LEEWAY_US:
        raise future_error(ts, now)
    horizon = now - LEEWAY_US
    operating = [i for i, start in enumerate(starts_us) if start <= horizon]
    current = operating[-1] if operating else None
    if ts <= horizon:
        superseded = current is not None and current + 1 < len(starts_us) and starts_us[current + 1] <= now
        if current is None or ts < starts_us[current] or superseded:
            raise past_error(ts, now)
    if not starts_us or ts < starts_us[0]:
        raise ServerError(
            f"cdc::metadata::get_stream: could not find any CDC stream for timestamp {format_timestamp(ts)}."
            " Are we in the middle of a cluster upgrade?"
        )


def _latest_at(timestamps_ms: list[int], ts_us: int) -> int | None:
    found = [t for t in timestamps_ms if t * 1000 <= ts_us]
    return found[-1] if found else None


class StreamRouter:
    def __init__(
        self,
        metadata: MetadataStore,
        settings: SimSettings,
        now_us: Callable[[], int],
        rng: random.Random,
    ) -> None:
        self.metadata = metadata
        self.settings = settings
        self.now_us = now_us
        self.rng = rng
        self._generations: dict[int, st.Generation] = {}
        self._generation_times: list[int] = []
        self._generations_read_at = -1e18
        self._sets: dict[tuple[str, str], dict[int, st.StreamSet]] = {}
        self._set_times: dict[tuple[str, str], tuple[float, list[int]]] = {}

    # ------------------------------------------------------------ vnodes

    def generation_times(self, refresh: bool = False) -> list[int]:
        """Starts (ms) of all vnode generations, oldest first; creates the first one if none."""
        if refresh or time.monotonic() - self._generations_read_at > self.settings.generation_refresh_s:
            self._generation_times = self.metadata.generation_timestamps()
            self._generations_read_at = time.monotonic()
            if not self._generation_times:
                self._publish_first_generation()
        return self._generation_times

    def _publish_first_generation(self) -> None:
        start_ms = (self.now_us() // 1000) - int(self.settings.first_generation_age_s * 1000)
        tokens = st.random_tokens(self.settings.nodes * self.settings.vnodes_per_node, self.rng)
        vnodes = [(t, self.settings.shards_per_node) for t in tokens]
        self._publish(st.build_generation(start_ms, vnodes, self.settings.sharding_ignore_msb, self.rng))

    def _publish(self, generation: st.Generation) -> None:
        self.metadata.publish_generation(generation)
        self._generations[generation.timestamp_ms] = generation
        self._generation_times = self.metadata.generation_timestamps()
        self._generations_read_at = time.monotonic()

    def generation(self, timestamp_ms: int) -> st.Generation:
        if timestamp_ms not in self._generations:
            self._generations[timestamp_ms] = self.metadata.load_generation(timestamp_ms)
        return self._generations[timestamp_ms]

    def vnode_stream(self, token: int, ts: int) -> StreamId:
        # Generations published by other processes are seen within `generation_refresh_s`, well
        # before they start (they are published seconds ahead).
        times = self.generation_times()
        now = self.now_us()
        check_vnode_timestamp(ts, now, [t * 1000 for t in times])
        start = _latest_at(times, ts)
        assert start is not None
        return self.generation(start).stream_for(token)

    def bootstrap_node(
        self, delay_s: float | None = None, vnodes: int | None = None, shards: int | None = None
    ) -> st.Generation:
        """Add a virtual node with its own tokens and publish the generation that results, starting
        `delay_s` from now."""
        times = self.generation_times(refresh=True)
        latest = self.generation(times[-1]).vnodes()
        tokens = st.random_tokens(vnodes or self.settings.vnodes_per_node, self.rng, (t for t, _ in latest))
        new_vnodes = latest + [(t, shards or self.settings.shards_per_node) for t in tokens]
        delay = self.settings.bootstrap_delay_s if delay_s is None else delay_s
        start_ms = max(self.now_us() // 1000 + int(delay * 1000), times[-1] + 1)
        generation = st.build_generation(start_ms, new_vnodes, self.settings.sharding_ignore_msb, self.rng)
        self._publish(generation)
        return generation

    # ------------------------------------------------------------ tablets

    def set_times(self, keyspace: str, table: str, refresh: bool = False) -> list[int]:
        key = (keyspace, table)
        read_at, times = self._set_times.get(key, (-1e18, []))
        if refresh or time.monotonic() - read_at > self.settings.generation_refresh_s:
            times = self.metadata.stream_set_timestamps(keyspace, table)
            self._set_times[key] = (time.monotonic(), times)
        return times

    def stream_set(self, keyspace: str, table: str, timestamp_ms: int) -> st.StreamSet:
        sets = self._sets.setdefault((keyspace, table), {})
        if timestamp_ms not in sets:
            sets[timestamp_ms] = self.metadata.load_stream_set(keyspace, table, timestamp_ms)
        return sets[timestamp_ms]

    def tablet_stream(self, keyspace: str, table: str, token: int, ts: int) -> StreamId:
        now = self.now_us()
        if ts > now + LEEWAY_US:
            raise future_error(ts, now)
        start = _latest_at(self.set_times(keyspace, table), ts)
        if start is None:
            raise ServerError(
                f"could not find any CDC streams for table {keyspace}.{table} for timestamp {format_timestamp(ts)}"
            )
        return self.stream_set(keyspace, table, start).stream_for(token)

    def create_tablet_streams(self, keyspace: str, table: str, tablets: int) -> st.StreamSet:
        """The first stream set of a new tablets table: it starts 5 s before the table was created."""
        start_ms = self.now_us() // 1000 - TABLETS_FIRST_SET_OFFSET_MS
        streams = tuple(st.tablet_stream(t, self.rng) for t in st.uniform_last_tokens(tablets))
        return self._publish_set(keyspace, table, st.StreamSet(start_ms, streams), None)

    def _publish_set(self, keyspace: str, table: str, new: st.StreamSet, previous: st.StreamSet | None) -> st.StreamSet:
        self.metadata.publish_stream_set(keyspace, table, new, previous)
        self._sets.setdefault((keyspace, table), {})[new.timestamp_ms] = new
        self.set_times(keyspace, table, refresh=True)
        return new

    def current_stream_set(self, keyspace: str, table: str) -> st.StreamSet:
        times = self.set_times(keyspace, table, refresh=True)
        if not times:
            raise InvalidRequestError(f"{keyspace}.{table} has no CDC stream set (is it a tablets table with CDC?)")
        return self.stream_set(keyspace, table, times[-1])

    def change_tablets(
        self,
        keyspace: str,
        table: str,
        change: Callable[[tuple[StreamId, ...]], Iterable[StreamId]],
        delay_s: float | None,
    ) -> st.StreamSet:
        """Publish the stream set `change` makes of the latest one, starting `delay_s` from now."""
        previous = self.current_stream_set(keyspace, table)
        streams = tuple(sorted(change(previous.streams), key=lambda s: s.token))
        delay = self.settings.new_stream_set_delay_s if delay_s is None else delay_s
        start_ms = max(self.now_us() // 1000 + int(delay * 1000), previous.timestamp_ms + 1)
        return self._publish_set(keyspace, table, st.StreamSet(start_ms, streams), previous)
