"""Settings of the CDC source (the read side), named after the Java connector's properties.

`bridge.settings.BridgeConfig.reader_settings()` fills a `ReaderSettings` from the `scylla.*`
keys; every field says which property it mirrors, and errors name that property. Defaults
differ from the Java connector where ours can do better: the connector reads 30 s windows
behind a 30 s confidence window (30-60 s latency); we read up to `now - confidence` as soon as a
short poll interval has passed, so latency is the confidence window plus well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

CONSISTENCY_LEVELS = frozenset(
    {"ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE"}
)

# Debezium's names; `never` is accepted as `no_data`'s old name (settings/model.py maps it).
SNAPSHOT_MODES = ("no_data", "initial", "initial_only", "when_needed")


@dataclass(frozen=True, slots=True)
class ReaderSettings:
    """How the source reads CDC log tables. All durations are milliseconds.

    - `confidence_window_size_ms` (`scylla.confidence.window.size`, default 30000): never read
      log rows newer than `now - confidence window`. Keep it above the write timeout.
    - `query_time_window_size_ms` (`scylla.query.time.window.size`, default 30000): the first
      window size of a group that is behind; later windows grow or shrink with the rows they
      return, between `min_window_size_ms` and `max_window_size_ms`.
    - `minimal_wait_for_window_time_ms` (`scylla.minimal.wait.for.window.time`, default 0): the
      least pause between two windows of one group (a throttle for catch-up).
    - `consistency_level` (`scylla.consistency.level`, default QUORUM): for log reads.
    - `initial_lookback_ms` (`scylla.initial.lookback.ms`, default 0 = unset): without a saved
      position start at `now - lookback` instead of the oldest data within the log TTL.
    - `max_inflight_queries` (our own, default 32): one bound on log and metadata queries in
      flight for the whole process, shared by every group, so catch-up cannot flood a cluster.
    - `vnodes_metadata_keyspace` (`scylla.cdc.metadata.vnodes.keyspace`, default
      `system_distributed`) and `tablets_metadata_keyspace` (`scylla.cdc.metadata.tablets.keyspace`,
      default `system`): where the stream metadata tables live (the emulator uses other names).
    - `poll_interval_ms` (our own, default 250): how often a caught-up group whose last windows
      were empty reads again.
    - `busy_poll_interval_ms` (our own, default 50): how often a caught-up group whose last window
      had rows reads again; each empty window doubles its interval back up to `poll_interval_ms`.
      A busy group's next rows cross the confidence line within milliseconds, so the wait for
      the next poll is most of the latency beyond the window (bench: p99 0.51 s at a fixed 250 ms);
      idle groups, most streams of a large cluster, keep the longer interval and its query load.
    - `metadata_poll_interval_ms` (our own, default 500): how often new generations and
      stream sets are looked for. No window reads past the start of the last complete metadata
      poll (a switch published late must not be read across), so keep it well below the
      confidence window or it adds to the latency (at 2000 ms with a 2 s confidence window the
      p99 delay rose from 0.56 s to 1.13 s in bench/latency_reader.py).
    - `page_size` (our own, default 500): rows per page of a log query; with the in-flight bound
      it caps the rows held in memory.
    - `max_buffered_rows` (our own, default 10000): rows handed on but not yet polled before
      reading pauses (backpressure).
    - `request_timeout_ms` (our own, default 12000): client-side timeout of one query.
    - `backoff_base_ms` / `backoff_max_ms` (our own, 100 / 30000): retry delays on transient errors.
    - `missing_table_timeout_ms` (our own, default 60000): how long a missing log table is waited
      for before the group fails.
    - `snapshot_mode` (`snapshot.mode`, default `no_data`): whether a group without a saved
      position (`initial`, `initial_only`, `when_needed`), or with one older than the log's TTL
      (`when_needed`), first reads its token ranges of the base table (docs/worker.md, Snapshots).
    - `snapshot_fetch_size` (`snapshot.fetch.size`, default 1000): rows per page of a snapshot read.
    - `snapshot_max_threads` (`snapshot.max.threads`, default 2): groups snapshotted at once by
      one worker (each with one page in flight), so a snapshot cannot flood the cluster.
    """

    confidence_window_size_ms: int = 30_000
    query_time_window_size_ms: int = 30_000
    minimal_wait_for_window_time_ms: int = 0
    consistency_level: str = "QUORUM"
    initial_lookback_ms: int = 0
    max_inflight_queries: int = 32
    vnodes_metadata_keyspace: str = "system_distributed"
    tablets_metadata_keyspace: str = "system"
    poll_interval_ms: int = 250
    busy_poll_interval_ms: int = 50
    metadata_poll_interval_ms: int = 500
    page_size: int = 500
    max_buffered_rows: int = 10_000
    request_timeout_ms: int = 12_000
    backoff_base_ms: int = 100
    backoff_max_ms: int = 30_000
    missing_table_timeout_ms: int = 60_000
    min_window_size_ms: int = 1_000
    max_window_size_ms: int = 3_600_000
    target_rows_per_window: int = 5_000
    snapshot_mode: str = "no_data"
    snapshot_fetch_size: int = 1_000
    snapshot_max_threads: int = 2

    def __post_init__(self) -> None:
        for name in (
            "confidence_window_size_ms", "query_time_window_size_ms",
            "minimal_wait_for_window_time_ms", "initial_lookback_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{setting_key(name)}: must be >= 0, got {getattr(self, name)}")
        for name in (
            "max_inflight_queries", "poll_interval_ms", "busy_poll_interval_ms", "metadata_poll_interval_ms",
            "page_size",
            "max_buffered_rows", "request_timeout_ms", "backoff_base_ms", "backoff_max_ms",
            "min_window_size_ms", "max_window_size_ms", "target_rows_per_window", "snapshot_fetch_size",
            "snapshot_max_threads",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{setting_key(name)}: must be > 0, got {getattr(self, name)}")
        if self.consistency_level.upper() not in CONSISTENCY_LEVELS:
            raise ValueError(
                f"{setting_key('consistency_level')}: {self.consistency_level!r} is not one of"
                f" {', '.join(sorted(CONSISTENCY_LEVELS))}"
            )
        if self.snapshot_mode not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot.mode: {self.snapshot_mode!r} is not one of {', '.join(SNAPSHOT_MODES)}")
        if self.min_window_size_ms > self.max_window_size_ms:
            raise ValueError("min_window_size_ms: must not exceed max_window_size_ms")


# The property each user-settable field mirrors (design.md 2.1); the others are the bridge's own
# tuning knobs, set in code, and go by their field names.
_PROPERTY_KEYS = {
    "confidence_window_size_ms": "scylla.confidence.window.size",
    "query_time_window_size_ms": "scylla.query.time.window.size",
    "minimal_wait_for_window_time_ms": "scylla.minimal.wait.for.window.time",
    "consistency_level": "scylla.consistency.level",
    "initial_lookback_ms": "scylla.initial.lookback.ms",
    "vnodes_metadata_keyspace": "scylla.cdc.metadata.vnodes.keyspace",
    "tablets_metadata_keyspace": "scylla.cdc.metadata.tablets.keyspace",
    "snapshot_fetch_size": "snapshot.fetch.size",
    "snapshot_max_threads": "snapshot.max.threads",
}


def setting_key(field_name: str) -> str:
    """What an error about `field_name` calls it: its property key, else the field name."""
    return _PROPERTY_KEYS.get(field_name, field_name)
