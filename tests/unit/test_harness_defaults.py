"""The shared test harnesses start workers with the shipped defaults (issue 42: the REST offsets
endpoints timed out on the default 25-partition offsets topic while the harness's 3 partitions
hid it): every setting they give that differs from bridge/settings' default is listed, with its
reason, in harness.DEFAULT_EXCEPTIONS, and nothing else differs."""

from __future__ import annotations

from typing import Any

from bridge.settings import BridgeConfig
from bridge.settings.load import build_config
from bridge.stack.layout import Endpoints
from tests.faults.lab import FaultLab
from tests.integration.worker.harness import DEFAULT_EXCEPTIONS, DEFAULT_SLOTS, worker_properties

# Settings with no default: what names the connector, its tables and the stack's addresses.
REQUIRED = {"name", "topic.prefix", "scylla.cluster.ip.addresses", "scylla.table.names", "kafka.bootstrap.servers"}


def _defaults() -> dict[str, Any]:
    return {field.alias: field.default for field in BridgeConfig.model_fields.values() if field.alias}


def _differing(props: dict[str, str]) -> set[str]:
    config = build_config(props)
    defaults = _defaults()
    return {key for key in props if key not in REQUIRED
            and getattr(config, _field_of(key)) != defaults[key]}


def _field_of(alias: str) -> str:
    return next(name for name, field in BridgeConfig.model_fields.items() if field.alias == alias)


def test_the_worker_harness_differs_from_the_defaults_only_where_listed_with_a_reason() -> None:
    props = worker_properties(Endpoints(), "harness-check", ["ks.t"])
    assert _differing(props) == set(DEFAULT_EXCEPTIONS), "list (or drop) each difference in DEFAULT_EXCEPTIONS"
    assert all(reason.strip() for reason in DEFAULT_EXCEPTIONS.values())


def test_the_defaults_that_hid_issue_42_are_the_shipped_ones() -> None:
    props = worker_properties(Endpoints(), "harness-check", ["ks.t"])
    config = build_config(props)
    assert (config.offset_storage_partitions, config.slots_count) == (25, 64) == (
        _defaults()["offset.storage.partitions"], DEFAULT_SLOTS)
    assert "offset.storage.partitions" not in props and "slots.count" not in props


def test_the_fault_lab_builds_on_the_same_harness() -> None:
    assert FaultLab.properties.__code__.co_names.count("worker_properties") == 1
