"""The worker's Prometheus metrics, all named `cdc_bridge_*`, on one registry per process.

Labels are bounded: keyspace and table come from the configuration, `op` from the envelope
(`c`, `u`, `d`, `r`, or `tombstone`), `kind` from small enums, and `group` only on the lag
gauge, whose series are dropped as soon as a group leaves this worker (finished, or its slot
moved), so a long run does not pile up dead series. No label ever carries a setting's value.

The recording methods are what the worker and the reader call; the hot ones (`produced`,
`rows_read`) keep their label children in a dict, since `labels()` costs a lock and a hash of
every label each time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# A transaction commit waits for the brokers' acknowledgements: milliseconds when healthy,
# up to the client's timeouts (30 s) when not.
COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# One CDC log query (one page of one stream's window): sub-millisecond on an idle node,
# seconds under load, up to the driver's request timeout.
QUERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OPS = ("c", "u", "d", "r", "tombstone")
DROP_KINDS = ("range_delete", "partition_delete_clustered")
QUERY_ERROR_KINDS = ("transient", "table_missing", "fatal")
ABORT_REASONS = ("aborted", "fenced")
OFFSETS_CORRUPT_KINDS = ("key", "group_key", "value")  # bridge.kafka.offsets_topic.CORRUPT_KINDS
GroupKey = tuple[str, str, str]  # keyspace, table, group id as text


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        table = ["keyspace", "table"]
        self.rows_read_total = Counter("cdc_bridge_rows_read", "CDC log rows read (deltas and images).",
                                       table, registry=r)
        self.records_produced_total = Counter(
            "cdc_bridge_records_produced", "Records produced to the data topics, by envelope op "
            "(tombstone for the record after a delete).", [*table, "op"], registry=r)
        self.deletes_dropped_total = Counter(
            "cdc_bridge_deletes_dropped", "Deletes that give no data event (range deletes, partition deletes "
            "of tables with clustering keys), by kind.", [*table, "kind"], registry=r)
        self.missing_images_total = Counter(
            "cdc_bridge_missing_images", "Changes emitted with before or after null because the record had no "
            "pre-/post-image row the advanced format's cdc.include mode needs, by image.", [*table, "image"],
            registry=r)
        self.transactions_committed_total = Counter("cdc_bridge_transactions_committed",
                                                    "Kafka transactions committed.", registry=r)
        self.transactions_aborted_total = Counter(
            "cdc_bridge_transactions_aborted", "Kafka transactions aborted (their groups are re-read from the "
            "last commit); reason fenced: this worker's producer was fenced by a newer owner.", ["reason"],
            registry=r)
        self.commit_seconds = Histogram("cdc_bridge_commit_seconds", "Time to commit one Kafka transaction "
                                        "(flush, group offsets, commit).", buckets=COMMIT_BUCKETS, registry=r)
        self.group_lag_seconds = Gauge(
            "cdc_bridge_group_lag_seconds", "How far an owned group's position is behind what may be read: "
            "now - confidence window - position.", [*table, "group"], registry=r)
        self.table_lag_seconds = Gauge("cdc_bridge_table_lag_seconds",
                                       "The largest lag of this worker's groups of the table.", table, registry=r)
        self.window_read_seconds = Histogram(
            "cdc_bridge_window_read_seconds", "Latency of one CDC log query (one page of one stream's window).",
            table, buckets=QUERY_BUCKETS, registry=r)
        self.query_errors_total = Counter("cdc_bridge_query_errors", "Failed CDC log queries, by kind "
                                          "(transient ones are retried).", [*table, "kind"], registry=r)
        self.owned_slots = Gauge("cdc_bridge_owned_slots", "Slots this worker owns.", registry=r)
        self.active_groups = Gauge("cdc_bridge_active_groups", "Groups this worker is reading.", registry=r)
        self.producer_queue_depth = Gauge("cdc_bridge_producer_queue_depth",
                                          "Records waiting in the producer's local queue.", registry=r)
        self.possible_gaps_total = Counter(
            "cdc_bridge_possible_gaps", "Groups whose saved position was older than the log TTL (rows may "
            "have expired unread).", table, registry=r)
        self.ready = Gauge("cdc_bridge_ready", "1 when /readyz answers ready.", registry=r)
        self.signals_total = Counter("cdc_bridge_signals", "Snapshot signals read, by outcome: applied (to "
                                     "the tables served), refused (malformed, unsupported, or for a table not "
                                     "served).", ["outcome"], registry=r)
        self.snapshot_groups = Gauge("cdc_bridge_snapshot_groups", "Groups whose snapshot this worker is "
                                     "reading.", table, registry=r)
        self.snapshot_progress = Gauge("cdc_bridge_snapshot_progress", "Share (0-1) of the token ranges done "
                                       "by the snapshots this worker is reading, per table.", table, registry=r)
        self.offsets_records_corrupt_total = Counter(
            "cdc_bridge_offsets_records_corrupt", "Unreadable records read from the offsets topic, by kind: key "
            "(no connector's key: ignored), group_key (names this connector but no group), value (a group's "
            "position): the last two fail start-up or the group.", ["kind"], registry=r)
        self.changes_failed_total = Counter(
            "cdc_bridge_changes_failed", "Changes the bridge could not translate or serialize, by what was done: "
            "passed (warn or skip) or failed (the group stops and is retried).", [*table, "action"], registry=r)
        self._produced: dict[tuple[str, str, str], Counter] = {}
        self._rows: dict[tuple[str, str], Counter] = {}
        self._lag_keys: set[GroupKey] = set()
        self._lag_tables: set[tuple[str, str]] = set()

    def declare_tables(self, tables: Iterable[tuple[str, str]]) -> None:
        """Create every per-table series at zero, so dashboards and alerts see them from the start."""
        for keyspace, table in tables:
            self._rows_child(keyspace, table)
            for op in OPS:
                self._produced_child(keyspace, table, op)
            for kind in DROP_KINDS:
                self.deletes_dropped_total.labels(keyspace, table, kind)
            for kind in QUERY_ERROR_KINDS:
                self.query_errors_total.labels(keyspace, table, kind)
            self.possible_gaps_total.labels(keyspace, table)
            for image in ("before", "after"):
                self.missing_images_total.labels(keyspace, table, image)
            self.snapshot_groups.labels(keyspace, table)
            self.snapshot_progress.labels(keyspace, table)
            for action in ("passed", "failed"):
                self.changes_failed_total.labels(keyspace, table, action)
            self.window_read_seconds.labels(keyspace, table)
        for reason in ABORT_REASONS:
            self.transactions_aborted_total.labels(reason)
        for kind in OFFSETS_CORRUPT_KINDS:
            self.offsets_records_corrupt_total.labels(kind)
        for outcome in ("applied", "refused"):
            self.signals_total.labels(outcome)

    # ------------------------------------------------------------------ the worker's calls

    def rows_read(self, keyspace: str, table: str, rows: int) -> None:
        self._rows_child(keyspace, table).inc(rows)

    def produced(self, keyspace: str, table: str, op: str, count: int = 1) -> None:
        self._produced_child(keyspace, table, op).inc(count)

    def dropped(self, keyspace: str, table: str, kind: str, count: int) -> None:
        self.deletes_dropped_total.labels(keyspace, table, kind).inc(count)

    def missing_images(self, keyspace: str, table: str, image: str, count: int) -> None:
        self.missing_images_total.labels(keyspace, table, image).inc(count)

    def committed(self, seconds: float) -> None:
        self.transactions_committed_total.inc()
        self.commit_seconds.observe(seconds)

    def aborted(self, reason: str) -> None:
        self.transactions_aborted_total.labels(reason).inc()

    def offsets_record_corrupt(self, kind: str) -> None:
        self.offsets_records_corrupt_total.labels(kind).inc()

    def change_failed(self, keyspace: str, table: str, action: str) -> None:
        self.changes_failed_total.labels(keyspace, table, action).inc()

    def possible_gap(self, keyspace: str, table: str) -> None:
        self.possible_gaps_total.labels(keyspace, table).inc()

    def set_lags(self, lags: Mapping[GroupKey, float]) -> None:
        """The lag of every group this worker reads now; series of groups not listed are removed."""
        by_table: dict[tuple[str, str], float] = {}
        for key, lag in lags.items():
            self.group_lag_seconds.labels(*key).set(lag)
            table = (key[0], key[1])
            by_table[table] = max(by_table.get(table, 0.0), lag)
        for gone in self._lag_keys - lags.keys():
            self.group_lag_seconds.remove(*gone)
        for table, lag in by_table.items():
            self.table_lag_seconds.labels(*table).set(lag)
        for table in self._lag_tables - by_table.keys():
            self.table_lag_seconds.labels(*table).set(0.0)  # no owned group behind: nothing to catch up
        self._lag_keys = set(lags)
        self._lag_tables |= by_table.keys()

    def set_owned(self, slots: int, groups: int) -> None:
        self.owned_slots.set(slots)
        self.active_groups.set(groups)

    def set_queue_depth(self, records: int) -> None:
        self.producer_queue_depth.set(records)

    # ------------------------------------------------------------------ the reader's calls

    def query_done(self, keyspace: str, table: str, seconds: float) -> None:
        self.window_read_seconds.labels(keyspace, table).observe(seconds)

    def query_failed(self, keyspace: str, table: str, kind: str) -> None:
        self.query_errors_total.labels(keyspace, table, kind).inc()

    # ------------------------------------------------------------------ internals

    def _produced_child(self, keyspace: str, table: str, op: str) -> Counter:
        key = (keyspace, table, op)
        child = self._produced.get(key)
        if child is None:
            child = self._produced[key] = self.records_produced_total.labels(keyspace, table, op)
        return child

    def _rows_child(self, keyspace: str, table: str) -> Counter:
        key = (keyspace, table)
        child = self._rows.get(key)
        if child is None:
            child = self._rows[key] = self.rows_read_total.labels(keyspace, table)
        return child
