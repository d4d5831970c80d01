"""The Helm chart's values.schema.json knows every setting of the settings model, with its type and
bounds, so `helm install` refuses a typo'd or out-of-range setting before a pod starts; settings
the chart manages itself (identity, port, credentials, TLS files) are refused in `config`.
A setting added to the model without the chart fails here, with the entry to add."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import annotated_types
from pydantic import SecretStr

from bridge.config import _KAFKA_SECRETS, BridgeConfig
from bridge.scylla.settings import CONSISTENCY_LEVELS

SCHEMA = Path(__file__).resolve().parents[2] / "helm" / "scylla-cdc-bridge" / "values.schema.json"
# Set by the chart from its own values (workload, metrics.port, scylla.auth, kafka.sasl/tls).
MANAGED = {
    "worker.instance.id", "metrics.port", "scylla.user", "scylla.password", "scylla.password.file",
    "kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.password",
    "kafka.sasl.password.file", "kafka.ssl.ca.location", "kafka.ssl.certificate.location",
    "kafka.ssl.key.location", "kafka.ssl.key.password",
}
# Secrets librdkafka takes inline; the chart has no file for them, so they are refused outright.
REFUSED = {"kafka.ssl.keystore.password", "kafka.ssl.key.pem", "kafka.sasl.oauthbearer.client.secret", "kafka.ssl_key"}
REQUIRED = ["topic.prefix", "scylla.cluster.ip.addresses", "scylla.table.names", "kafka.bootstrap.servers"]


def _plain(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (Union, types.UnionType):
        return next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation


def expected_entry(alias: str) -> Any:
    info = next(i for n, i in BridgeConfig.model_fields.items() if (i.alias or n) == alias)
    if alias in MANAGED:
        return False
    annotation = _plain(info.annotation)
    entry: dict[str, Any]
    if annotation is bool:
        entry = {"type": "boolean"}
    elif annotation is int:
        entry = {"type": "integer"}
        for bound in info.metadata:
            if isinstance(bound, annotated_types.Ge):
                entry["minimum"] = bound.ge
            if isinstance(bound, annotated_types.Le):
                entry["maximum"] = bound.le
    elif annotation in (str, Path):
        entry = {"type": "string"}
        if info.is_required():
            entry["minLength"] = 1
        if alias == "scylla.consistency.level":
            entry["enum"] = sorted(CONSISTENCY_LEVELS)
    else:
        raise AssertionError(f"{alias}: no JSON type for {annotation}")
    if info.description:
        entry["description"] = info.description
    return entry


def _config_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA.read_text())
    config = schema["properties"]["config"]
    assert isinstance(config, dict)
    return config


def test_every_setting_is_in_the_chart_schema_with_its_type() -> None:
    properties = _config_schema()["properties"]
    for name, info in BridgeConfig.model_fields.items():
        alias = info.alias or name
        if alias == "kafka.*":
            continue
        want = expected_entry(alias)
        assert alias in properties, (f"helm/scylla-cdc-bridge/values.schema.json lacks config setting {alias!r}; "
                                     f"add under properties.config.properties: {json.dumps({alias: want})}")
        assert properties[alias] == want, f"values.schema.json: {alias!r} should be {json.dumps(want)}"
    known = {info.alias or name for name, info in BridgeConfig.model_fields.items()}
    stale = sorted(set(properties) - known - MANAGED - REFUSED - {"kafka.bootstrap.servers"})
    assert stale == [], f"values.schema.json lists settings the code does not accept: {stale}"


def test_unknown_settings_are_refused_and_kafka_passes_through() -> None:
    config = _config_schema()
    assert config["additionalProperties"] is False
    assert config["required"] == REQUIRED
    assert set(config["patternProperties"]) == {"^kafka\\."}
    for key in MANAGED:
        assert config["properties"].get(key) is False, f"{key} is the chart's to set"


def test_secret_settings_are_refused_in_config() -> None:
    """A secret setting must never be writable into the ConfigMap through `config`: the model's
    secrets and the librdkafka secrets it masks are `false` in the schema."""
    properties = _config_schema()["properties"]
    for name, info in BridgeConfig.model_fields.items():
        if (info.alias or name) != "kafka.*" and SecretStr in (info.annotation, *get_args(info.annotation)):
            assert properties[info.alias or name] is False, f"{info.alias}: a secret the chart would render"
    for key in _KAFKA_SECRETS:
        assert properties.get(f"kafka.{key}") is False, f"kafka.{key}: a secret the chart would render in plain text"
