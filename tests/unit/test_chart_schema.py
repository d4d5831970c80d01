"""The Helm chart's values.schema.json knows every setting of the settings model, with its type and
bounds (bridge/config_schema.py generates that part), so `helm install` refuses a typo'd or
out-of-range setting; settings the chart manages itself and secrets are refused in `config`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import SecretStr

from bridge.settings import BridgeConfig
from bridge.settings.chart_schema import CHART_MANAGED, chart_config_schema, setting_schema, update_chart_schema
from bridge.settings.masking import KAFKA_SECRETS

SCHEMA = Path(__file__).resolve().parents[2] / "helm" / "scylla-cdc-bridge" / "values.schema.json"
REGENERATE = "run `.venv/bin/cdc-bridge config reference --update helm/scylla-cdc-bridge/values.schema.json`"


def _config_schema() -> dict[str, Any]:
    config = json.loads(SCHEMA.read_text())["properties"]["config"]
    assert isinstance(config, dict)
    return config


def test_chart_schema_is_the_generated_one() -> None:
    """A setting added to the model (or changed) without the chart fails here."""
    on_file, generated = _config_schema(), chart_config_schema()
    missing = sorted(set(generated["properties"]) - set(on_file["properties"]))
    assert missing == [], f"values.schema.json lacks settings {missing}; {REGENERATE}"
    assert on_file == generated, f"values.schema.json config schema is stale; {REGENERATE}"


def test_every_setting_has_a_typed_entry() -> None:
    properties = chart_config_schema()["properties"]
    for name, info in BridgeConfig.model_fields.items():
        alias = info.alias or name
        if alias == "kafka.*":
            continue
        entry = properties[alias]
        assert entry is False or entry["type"] in ("string", "integer", "boolean", ["integer", "string"]), alias
    assert properties["slots.count"] == {"type": "integer", "minimum": 1,
                                         "description": BridgeConfig.model_fields["slots_count"].description}
    assert properties["tombstones.on.delete"]["type"] == "boolean"
    assert "QUORUM" in properties["scylla.consistency.level"]["enum"]


def test_unknown_settings_are_refused_and_kafka_passes_through() -> None:
    config = _config_schema()
    assert config["additionalProperties"] is False
    assert config["required"] == ["topic.prefix", "scylla.cluster.ip.addresses", "scylla.table.names",
                                  "kafka.bootstrap.servers"]
    assert set(config["patternProperties"]) == {"^kafka\\."}
    for key in CHART_MANAGED:
        assert config["properties"].get(key) is False, f"{key} is the chart's to set"


def test_secret_settings_are_refused_in_config() -> None:
    """A secret must never be writable into the ConfigMap through `config`: the model's secrets
    and the librdkafka secrets it masks are `false` in the schema."""
    properties = _config_schema()["properties"]
    for name, info in BridgeConfig.model_fields.items():
        if (info.alias or name) != "kafka.*" and SecretStr in (info.annotation, *get_args(info.annotation)):
            assert properties[info.alias or name] is False, f"{info.alias}: a secret the chart would render"
    for key in KAFKA_SECRETS:
        assert properties.get(f"kafka.{key}") is False, f"kafka.{key}: a secret the chart would render in plain text"


def test_update_rewrites_only_the_config_part(tmp_path: Path) -> None:
    path = tmp_path / "values.schema.json"
    path.write_text(json.dumps({"type": "object", "properties": {"config": {}, "other": {"type": "string"}}}))
    assert update_chart_schema(path) is True
    written = json.loads(path.read_text())
    assert written["properties"]["other"] == {"type": "string"}
    assert written["properties"]["config"] == chart_config_schema()
    assert update_chart_schema(path) is False
    with pytest.raises(KeyError):
        setting_schema("no.such.setting")
