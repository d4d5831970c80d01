"""The metrics registry: every series named cdc_bridge_*, per-table series present from the
start, lag series of groups that left removed."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bridge.observability.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def test_every_name_starts_with_cdc_bridge_and_registries_are_per_instance() -> None:
    first, second = Metrics(), Metrics()  # a second registry: no "duplicated timeseries" error
    first.declare_tables([("ks", "t")])
    second.committed(0.01)
    names = {name for name, _ in samples(first)}
    assert names and all(name.startswith("cdc_bridge_") for name in names)
    assert samples(first)[("cdc_bridge_transactions_committed_total", ())] == 0
    assert samples(second)[("cdc_bridge_transactions_committed_total", ())] == 1


def test_declared_tables_have_zero_series_and_recordings_add_up() -> None:
    metrics = Metrics()
    metrics.declare_tables([("ks", "orders")])
    table = (("keyspace", "ks"), ("table", "orders"))
    before = samples(metrics)
    for op in ("c", "u", "d", "r", "tombstone"):
        assert before[key("cdc_bridge_records_produced_total", keyspace="ks", table="orders", op=op)] == 0
    assert before[("cdc_bridge_deletes_dropped_total", (("keyspace", "ks"), ("kind", "range_delete"),
                                                          ("table", "orders")))] == 0
    assert before[("cdc_bridge_possible_gaps_total", table)] == 0
    assert before[("cdc_bridge_transactions_aborted_total", (("reason", "fenced"),))] == 0

    metrics.rows_read("ks", "orders", 3)
    metrics.produced("ks", "orders", "c", 2)
    metrics.produced("ks", "orders", "tombstone")
    metrics.dropped("ks", "orders", "range_delete", 4)
    metrics.committed(0.02)
    metrics.aborted("fenced")
    metrics.query_done("ks", "orders", 0.003)
    metrics.query_failed("ks", "orders", "transient")
    metrics.possible_gap("ks", "orders")
    metrics.set_owned(5, 7)
    metrics.set_queue_depth(11)
    after = samples(metrics)
    assert after[("cdc_bridge_rows_read_total", table)] == 3
    assert after[key("cdc_bridge_records_produced_total", keyspace="ks", table="orders", op="c")] == 2
    assert after[key("cdc_bridge_records_produced_total", keyspace="ks", table="orders", op="tombstone")] == 1
    assert after[("cdc_bridge_deletes_dropped_total", (("keyspace", "ks"), ("kind", "range_delete"),
                                                         ("table", "orders")))] == 4
    assert after[("cdc_bridge_commit_seconds_count", ())] == 1
    assert after[("cdc_bridge_commit_seconds_bucket", (("le", "0.025"),))] == 1
    assert after[("cdc_bridge_commit_seconds_bucket", (("le", "0.01"),))] == 0
    assert after[("cdc_bridge_transactions_aborted_total", (("reason", "fenced"),))] == 1
    assert after[("cdc_bridge_window_read_seconds_count", table)] == 1
    assert after[("cdc_bridge_query_errors_total", (("keyspace", "ks"), ("kind", "transient"),
                                                     ("table", "orders")))] == 1
    assert after[("cdc_bridge_possible_gaps_total", table)] == 1
    assert after[("cdc_bridge_owned_slots", ())] == 5
    assert after[("cdc_bridge_active_groups", ())] == 7
    assert after[("cdc_bridge_producer_queue_depth", ())] == 11


def test_lag_series_follow_the_groups_a_worker_reads() -> None:
    metrics = Metrics()
    metrics.set_lags({("ks", "t", "ks.t/1/0"): 12.5, ("ks", "t", "ks.t/1/1"): 3.0, ("ks", "u", "ks.u/1/0"): 1.0})
    found = samples(metrics)
    assert found[("cdc_bridge_group_lag_seconds", (("group", "ks.t/1/0"), ("keyspace", "ks"), ("table", "t")))] == 12.5
    assert found[("cdc_bridge_table_lag_seconds", (("keyspace", "ks"), ("table", "t")))] == 12.5

    metrics.set_lags({("ks", "t", "ks.t/1/1"): 2.0})  # group 0 finished, table u's slot moved away
    found = samples(metrics)
    lag_groups = {dict(labels)["group"] for name, labels in found if name == "cdc_bridge_group_lag_seconds"}
    assert lag_groups == {"ks.t/1/1"}
    assert found[("cdc_bridge_table_lag_seconds", (("keyspace", "ks"), ("table", "t")))] == 2.0
    assert found[("cdc_bridge_table_lag_seconds", (("keyspace", "ks"), ("table", "u")))] == 0.0
