"""`worker.processes` (bridge/worker/supervisor.py): the setting, what `auto` counts (affinity and
the cgroup v2 quota, over given file contents), the children's metrics merged into one exposition
with the `worker_process` label, and the probes' combined answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bridge.observability.merged_metrics import MergedCollector, merge_expositions
from bridge.settings import ConfigError
from bridge.settings.load import build_config, from_environment
from bridge.worker.cpus import available_cpus, cgroup_cpu_max, cpus_from, process_count
from bridge.worker.supervisor import _combined
from tests.unit.test_config import BASE, with_


def test_the_default_is_one_process_and_auto_or_positive_integers_are_taken() -> None:
    assert build_config(BASE).worker_processes == "1"
    assert build_config(with_(worker__processes="auto")).worker_processes == "auto"
    assert build_config(with_(worker__processes=" AUTO ")).worker_processes == "auto"
    assert build_config(with_(worker__processes="4")).worker_processes == "4"
    assert build_config(with_(worker__processes="08")).worker_processes == "8"
    assert from_environment({"CDC_BRIDGE_WORKER_PROCESSES": "2"}) == {"worker.processes": "2"}
    assert process_count("3") == 3
    assert process_count("auto") == available_cpus() >= 1


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "two", "auto,2", ""])
def test_a_bad_process_count_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config(with_(worker__processes=value))
    assert str(raised.value) == f"worker.processes: {value!r}: must be a positive integer or auto"


def test_auto_counts_the_affinity_bounded_by_the_cgroup_quota() -> None:
    assert cpus_from(8, None) == 8  # no cgroup v2 file
    assert cpus_from(8, "max 100000\n") == 8  # no quota
    assert cpus_from(8, "200000 100000\n") == 2
    assert cpus_from(8, "150000 100000\n") == 2  # 1.5 CPUs: a second process still has half a core
    assert cpus_from(8, "50000 100000\n") == 1  # half a CPU: still one process
    assert cpus_from(2, "800000 100000\n") == 2  # the affinity is the tighter bound
    assert cpus_from(4, "300000") == 3  # the kernel's default period
    assert cpus_from(4, "garbage here") == 4
    assert cpus_from(0, None) == 1


def test_the_quota_file_is_found_from_proc_self_cgroup(tmp_path: Path) -> None:
    (tmp_path / "kubepods" / "pod1").mkdir(parents=True)
    (tmp_path / "kubepods" / "pod1" / "cpu.max").write_text("250000 100000\n")
    assert cgroup_cpu_max("0::/kubepods/pod1\n", tmp_path) == "250000 100000\n"
    assert cgroup_cpu_max("12:cpu,cpuacct:/docker/abc\n", tmp_path) is None  # cgroup v1: no quota read
    assert cgroup_cpu_max("0::/gone\n", tmp_path) is None
    assert available_cpus() <= len(os.sched_getaffinity(0))


def _child(rows: int, ready: int, latency: float) -> str:
    registry = CollectorRegistry()
    Counter("cdc_bridge_rows_read", "CDC log rows read.", ["keyspace", "table"], registry=registry).labels(
        "ks", "t").inc(rows)
    Gauge("cdc_bridge_ready", "1 when ready.", registry=registry).set(ready)
    Histogram("cdc_bridge_commit_seconds", "Commit time.", buckets=(0.1, 1.0), registry=registry).observe(latency)
    return generate_latest(registry).decode()


def test_two_childrens_metrics_become_one_exposition_with_the_worker_process_label() -> None:
    registry = CollectorRegistry()
    registry.register(MergedCollector(lambda: {"1": _child(5, 0, 0.5), "0": _child(3, 1, 0.05)}))
    text = generate_latest(registry).decode()
    for family in ("cdc_bridge_rows_read_total", "cdc_bridge_ready", "cdc_bridge_commit_seconds"):
        assert text.count(f"# HELP {family} ") == 1 and text.count(f"# TYPE {family} ") == 1, family
    assert 'cdc_bridge_rows_read_total{keyspace="ks",table="t",worker_process="0"} 3.0' in text
    assert 'cdc_bridge_rows_read_total{keyspace="ks",table="t",worker_process="1"} 5.0' in text
    assert 'cdc_bridge_commit_seconds_bucket{le="0.1",worker_process="0"} 1.0' in text
    assert 'cdc_bridge_commit_seconds_bucket{le="0.1",worker_process="1"} 0.0' in text
    assert text.index('worker_process="0"') < text.index('worker_process="1"')  # children in index order
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["cdc_bridge_rows_read"].type == "counter"
    assert families["cdc_bridge_commit_seconds"].type == "histogram"
    assert {s.labels["worker_process"] for s in families["cdc_bridge_ready"].samples} == {"0", "1"}


def test_a_child_that_did_not_answer_is_absent_and_no_child_is_an_empty_exposition() -> None:
    merged = merge_expositions({"0": _child(1, 1, 0.01)})
    assert all(s.labels["worker_process"] == "0" for family in merged for s in family.samples)
    assert merge_expositions({}) == []


def test_probes_are_ok_only_when_every_child_is_with_one_line_per_child() -> None:
    assert _combined({0: (200, "ok: ready\n"), 1: (200, "ok: ready\n")}, "ready") == (
        True, "all 2 worker processes ready\n0: ok: ready\n1: ok: ready")
    ok, reason = _combined({0: (200, "ok: ready\n"), 1: (503, "not ok: group: not joined\n"),
                            2: (0, "not running (restarting)")}, "ready")
    assert not ok
    assert reason.splitlines() == ["2 of 3 worker processes not ready", "0: ok: ready",
                                   "1: not ok: group: not joined", "2: not running (restarting)"]
