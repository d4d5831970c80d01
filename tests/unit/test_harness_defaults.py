"""The shared test harnesses start workers with the shipped defaults (issue 42): every setting
they give that differs from the settings model's default is listed here with the reason it must,
and nothing else differs. A harness that drifts (a smaller offsets topic, fewer slots, a shorter
timeout) fails here, not in a user's first run."""

from __future__ import annotations

import pytest

from bridge.settings import BridgeConfig
from bridge.settings.model import setting_text
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import TEST_SETTINGS, worker_properties

# Required settings (no default) every worker needs.
REQUIRED = {"name", "topic.prefix", "scylla.cluster.ip.addresses", "scylla.table.names", "kafka.bootstrap.servers"}
JUSTIFIED = {
    "scylla.confidence.window.size": "CI time: a 30 s window in every worker test",
    "scylla.initial.lookback.ms": "CI time: 24 h of empty windows per stream before a fresh table's rows",
    "scylla.cdc.metadata.vnodes.keyspace": "the emulator: Cassandra refuses tables in system keyspaces",
    "scylla.cdc.metadata.tablets.keyspace": "the emulator: Cassandra refuses tables in system keyspaces",
    "key.converter.schemas.enable": "checks read plain JSON payloads; schemas are checked in envelope tests",
    "value.converter.schemas.enable": "checks read plain JSON payloads; schemas are checked in envelope tests",
    "metrics.port": "several workers on one host: 9404 would clash",
}


def _defaults() -> dict[str, str]:
    """Each setting's shipped default as text, as `config describe` shows it."""
    return {info.alias or name: ("" if info.is_required() else setting_text(info.default))
            for name, info in BridgeConfig.model_fields.items()}


def test_the_worker_harness_differs_from_the_defaults_only_where_listed() -> None:
    defaults = _defaults()
    props = worker_properties(Endpoints(), "n", ["ks.t"])
    assert set(props) - REQUIRED == set(TEST_SETTINGS)
    differing = {key for key, value in props.items() if key not in REQUIRED and defaults.get(key) != value}
    assert differing == set(JUSTIFIED), "a harness setting differs from the shipped default without a reason here"
    for key in ("offset.storage.partitions", "slots.count", "shutdown.timeout.ms", "startup.timeout.ms",
                "commit.interval.ms", "scylla.query.time.window.size", "heartbeat.interval.ms"):
        assert key not in props, f"{key}: the shipped default in every test"


@pytest.mark.parametrize("key", sorted(JUSTIFIED))
def test_each_exception_is_a_real_setting(key: str) -> None:
    assert key in _defaults()
