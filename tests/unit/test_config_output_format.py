"""The advanced output format's settings (issue 25): values checked with one line naming the key,
the format rules of the Java connector 2.x, and its `CdcTableOptionsValidator` rule on each
table's CDC options (scylla-cdc-source-connector, src/main/java/com/scylladb/cdc/debezium/connector/
CdcTableOptionsValidator.java at its HEAD in /work/.mirror: `"true".equalsIgnoreCase(preimage)`)."""

from __future__ import annotations

import pytest

from bridge.envelope.settings import DEFAULT_KEY_PLACEMENT, IncludeMode, KeyPlacement, OutputFormat
from bridge.settings import ConfigError
from bridge.settings.chart_schema import setting_schema
from bridge.settings.load import build_config
from bridge.settings.output_format import alter_table_fix, image_option_problem, needs_table_options

BASE = {
    "name": "c1",
    "topic.prefix": "p",
    "scylla.cluster.ip.addresses": "10.0.0.1:9042",
    "scylla.table.names": "ks.t",
    "kafka.bootstrap.servers": "k:9092",
}
ADVANCED = {"cdc.output.format": "advanced"}
SCYLLA_DEFAULTS = {"delta": "full", "enabled": "true", "postimage": "false", "preimage": "false", "ttl": "86400"}


def test_defaults_are_the_connectors() -> None:
    settings = build_config(BASE).envelope_settings()
    assert settings.cdc_output_format is OutputFormat.LEGACY
    assert settings.cdc_include_before is IncludeMode.NONE and settings.cdc_include_after is IncludeMode.NONE
    assert settings.cdc_include_primary_key_placement == DEFAULT_KEY_PLACEMENT
    assert settings.cdc_include_primary_key_payload_key_name == "key"
    assert settings.cdc_incomplete_task_timeout_ms == 15_000


def test_advanced_settings_reach_the_envelope_settings() -> None:
    config = build_config({**BASE, "cdc.output.format": " Advanced ", "cdc.include.before": "FULL",
                           "cdc.include.after": "only-updated",
                           "cdc.include.primary-key.placement": "kafka-headers, payload-key,payload-diff",
                           "cdc.include.primary-key.payload-key-name": "pk",
                           "cdc.incomplete.task.timeout.ms": "500"})
    settings = config.envelope_settings()
    assert (config.output_format, config.include_before, config.include_after) == ("advanced", "full", "only-updated")
    assert settings.advanced
    assert settings.cdc_include_before is IncludeMode.FULL and settings.cdc_include_after is IncludeMode.ONLY_UPDATED
    assert settings.cdc_include_primary_key_placement == {KeyPlacement.KAFKA_HEADERS, KeyPlacement.PAYLOAD_KEY,
                                                          KeyPlacement.PAYLOAD_DIFF}
    assert settings.cdc_include_primary_key_payload_key_name == "pk"
    assert settings.cdc_incomplete_task_timeout_ms == 500
    # a payload key name that is an envelope field only matters with payload-key
    assert build_config({**BASE, "cdc.include.primary-key.payload-key-name": "op"}).payload_key_name == "op"
    # the same set in any order is the default one, so legacy takes it
    assert build_config({**BASE, "cdc.include.primary-key.placement": "payload-before,kafka-key,payload-after"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cdc.output.format": "advnced"}, "cdc.output.format: must be one of legacy, advanced"),
        ({"cdc.include.before": "all"}, "cdc.include.before: must be one of none, full, only-updated"),
        ({**ADVANCED, "cdc.include.after": "partial"}, "cdc.include.after: must be one of none, full, only-updated"),
        ({**ADVANCED, "cdc.include.primary-key.placement": "kafka-key,payload"},
         "cdc.include.primary-key.placement: unknown placement 'payload'; use any of kafka-key"),
        ({**ADVANCED, "experimental.preimages.enabled": "true"},
         "experimental.preimages.enabled: must be false with cdc.output.format=advanced (use cdc.include.before)"),
        ({**ADVANCED, "experimental.postimages.enabled": "true"},
         "experimental.postimages.enabled: must be false with cdc.output.format=advanced (use cdc.include.after)"),
        ({"cdc.include.before": "full"},
         "cdc.include.before: must be none with cdc.output.format=legacy, not full (set cdc.output.format=advanced)"),
        ({"cdc.include.after": "only-updated"}, "cdc.include.after: must be none with cdc.output.format=legacy"),
        ({"cdc.include.primary-key.placement": "kafka-key"},
         "cdc.include.primary-key.placement: must be kafka-key,payload-after,payload-before with "
         "cdc.output.format=legacy, not kafka-key"),
        ({**ADVANCED, "cdc.include.primary-key.payload-key-name": ""},
         "cdc.include.primary-key.payload-key-name: input should be"),
        ({**ADVANCED, "cdc.include.primary-key.placement": "kafka-key,payload-key",
          "cdc.include.primary-key.payload-key-name": "after"},
         "cdc.include.primary-key.payload-key-name: 'after' is a field of the envelope already"),
        ({"cdc.incomplete.task.timeout.ms": "0"}, "cdc.incomplete.task.timeout.ms: input should be greater"),
    ],
)
def test_each_bad_output_setting_is_one_line_naming_its_key(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_config({**BASE, **changes})
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value)


def test_table_options_are_read_only_for_image_modes() -> None:
    assert not needs_table_options("none", "none")
    assert needs_table_options("full", "none") and needs_table_options("none", "only-updated")


@pytest.mark.parametrize("before", ["full", "only-updated"])
def test_before_needs_preimage_true_in_any_case(before: str) -> None:
    for value in ("true", "TRUE", "True"):
        assert image_option_problem("ks", "t", {**SCYLLA_DEFAULTS, "preimage": value}, before, "none") is None
    problem = image_option_problem("ks", "t", SCYLLA_DEFAULTS, before, "none")
    assert problem is not None and problem.key == "cdc.include.before"
    assert str(problem) == (
        f"cdc.include.before: table ks.t has 'preimage': 'false'; {before} needs 'preimage': true "
        "(ALTER TABLE ks.t WITH cdc = {'enabled': true, 'preimage': true, 'postimage': false, 'delta': 'full', "
        "'ttl': 86400})")


def test_full_preimage_is_refused_as_the_connector_refuses_it() -> None:
    problem = image_option_problem("ks", "t", {**SCYLLA_DEFAULTS, "preimage": "full"}, "full", "none")
    assert problem is not None
    assert str(problem).startswith("cdc.include.before: table ks.t has 'preimage': 'full'; full needs "
                                   "'preimage': true (the connector accepts true only, not full) (ALTER TABLE ks.t "
                                   "WITH cdc = {'enabled': true, 'preimage': true,")


def test_after_needs_postimage_true() -> None:
    assert image_option_problem("ks", "t", {**SCYLLA_DEFAULTS, "postimage": "true"}, "none", "full") is None
    problem = image_option_problem("ks", "t", SCYLLA_DEFAULTS, "none", "full")
    assert problem is not None and problem.key == "cdc.include.after"
    assert "has 'postimage': 'false'; full needs 'postimage': true" in str(problem)
    assert "'preimage': false, 'postimage': true" in str(problem)  # only what is needed is turned on


def test_before_is_named_first_and_one_alter_fixes_both() -> None:
    problem = image_option_problem("ks", "t", SCYLLA_DEFAULTS, "only-updated", "full")
    assert problem is not None and problem.key == "cdc.include.before"
    assert "'preimage': true, 'postimage': true" in str(problem)
    after_only = image_option_problem("ks", "t", {**SCYLLA_DEFAULTS, "preimage": "true"}, "full", "full")
    assert after_only is not None and after_only.key == "cdc.include.after"


def test_a_table_without_cdc_gets_the_alter_that_enables_it() -> None:
    """The connector's "does not have CDC enabled. Enable CDC with: ALTER TABLE ..." for a table
    whose options say CDC is off, whatever its image options say."""
    problem = image_option_problem("ks", "t", {}, "full", "none")
    assert problem is not None
    assert str(problem) == ("cdc.include.before: table ks.t has no cdc options (CDC is not enabled); full needs "
                            "'enabled': true and 'preimage': true (ALTER TABLE ks.t WITH cdc = {'enabled': true, "
                            "'preimage': true, 'postimage': false})")
    disabled = image_option_problem("ks", "t", {**SCYLLA_DEFAULTS, "enabled": "false", "postimage": "true"},
                                    "none", "full")
    assert disabled is not None and disabled.key == "cdc.include.after"
    assert "has 'enabled': 'false'; full needs 'enabled': true and 'postimage': true" in str(disabled)
    assert "{'enabled': true, 'preimage': false, 'postimage': true, 'delta': 'full', 'ttl': 86400}" in str(disabled)
    assert image_option_problem("ks", "t", {}, "none", "none") is None


def test_alter_keeps_the_tables_other_options() -> None:
    fix = alter_table_fix("ks", "t", {"enabled": "true", "preimage": "false", "postimage": "true", "delta": "keys",
                                      "ttl": "600"}, ["preimage"])
    assert fix == ("ALTER TABLE ks.t WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true, "
                   "'delta': 'keys', 'ttl': 600}")


def test_chart_schema_names_the_modes() -> None:
    assert setting_schema("cdc.output.format")["enum"] == ["legacy", "advanced"]
    assert setting_schema("cdc.include.after")["enum"] == ["none", "full", "only-updated"]
    assert setting_schema("cdc.incomplete.task.timeout.ms")["minimum"] == 1
