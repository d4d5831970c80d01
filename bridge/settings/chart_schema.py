"""The settings model as the JSON schema of the Helm chart's `config` values
(helm/scylla-cdc-bridge/values.schema.json), so `helm install` refuses a typo'd or out-of-range
setting before a pod starts. Generated from the model like the README's reference
(`cdc-bridge config reference --update helm/scylla-cdc-bridge/values.schema.json`).

Settings the chart sets from its own values (the pod's identity, the probe port, credentials and
TLS files) are `false` here, and so are secrets librdkafka takes inline: a password must never
land in the ConfigMap.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import annotated_types
from pydantic import SecretStr

from bridge.scylla.settings import CONSISTENCY_LEVELS
from bridge.settings.model import BridgeConfig
from bridge.settings.output_format import FORMATS, INCLUDE_MODES

# Set by the chart from workload, metrics.port, rest, scylla.auth and kafka.sasl/tls values.
CHART_MANAGED = frozenset({
    "worker.instance.id", "metrics.port", "scylla.user", "scylla.password", "scylla.password.file",
    "kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.password",
    "kafka.sasl.password.file", "kafka.ssl.ca.location", "kafka.ssl.certificate.location",
    "kafka.ssl.key.location", "kafka.ssl.key.password",
    "listeners", "listeners.https.ssl.keystore.location", "listeners.https.ssl.key.location",
    "listeners.https.ssl.truststore.location",
    "listeners.https.ssl.client.auth", "rest.auth.credentials.file",
})
# Secrets librdkafka takes inline, for which the chart has no file: refused outright.
CHART_REFUSED = frozenset({"kafka.ssl.keystore.password", "kafka.ssl.key.pem", "kafka.sasl.oauthbearer.client.secret",
                           "kafka.ssl_key", "kafka.sasl.jaas.config", "kafka.sasl.oauthbearer.config"})
# Settings with a fixed set of values (the bridge also takes them in any case; the chart wants them as written).
_ENUMS = {"scylla.consistency.level": tuple(sorted(CONSISTENCY_LEVELS)), "cdc.output.format": FORMATS,
          "cdc.include.before": INCLUDE_MODES, "cdc.include.after": INCLUDE_MODES}
CHART_REQUIRED = ("topic.prefix", "scylla.cluster.ip.addresses", "scylla.table.names", "kafka.bootstrap.servers")


def _plain(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (Union, types.UnionType):
        return next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation


def setting_schema(alias: str) -> Any:
    """The JSON schema of one setting (False: the chart's own, or a secret)."""
    if alias in CHART_MANAGED or alias in CHART_REFUSED:
        return False
    info = next((i for n, i in BridgeConfig.model_fields.items() if (i.alias or n) == alias), None)
    if info is None:
        raise KeyError(f"{alias}: not a setting")
    annotation = _plain(info.annotation)
    if annotation is SecretStr:  # a secret the chart has no file for (scylla.ssl.*.password): refused
        return False
    entry: dict[str, Any]
    if alias == "worker.processes":  # a number (as a YAML value would be written) or the word auto
        entry = {"type": ["integer", "string"], "minimum": 1, "pattern": "^([Aa][Uu][Tt][Oo]|[1-9][0-9]*)$"}
    elif annotation is bool:
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
        if alias in _ENUMS:
            entry["enum"] = list(_ENUMS[alias])
    else:
        raise TypeError(f"{alias}: no JSON schema type for {annotation}")
    if info.description:
        entry["description"] = info.description
    return entry


def chart_config_schema() -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, info in BridgeConfig.model_fields.items():
        alias = info.alias or name
        if alias != "kafka.*":
            properties[alias] = setting_schema(alias)
    properties["kafka.bootstrap.servers"] = {"type": "string", "minLength": 1,
                                             "description": "Kafka brokers, comma-separated host:port."}
    for alias in sorted(CHART_MANAGED | CHART_REFUSED):
        properties.setdefault(alias, False)
    return {
        "type": "object",
        "description": "The worker's settings by their property names (README: configuration reference); "
                       "rendered into worker.properties. Keys set by the chart itself, and secrets, are refused "
                       "here (false).",
        "required": list(CHART_REQUIRED),
        "properties": properties,
        "patternProperties": {"^kafka\\.": {"type": ["string", "integer", "number", "boolean"],
                                            "description": "librdkafka client settings under kafka."}},
        "additionalProperties": False,
    }


def update_chart_schema(path: Path) -> bool:
    """Rewrite the `config` part of the chart's values.schema.json; True when it changed."""
    text = path.read_text()
    schema = json.loads(text)
    schema["properties"]["config"] = chart_config_schema()
    updated = json.dumps(schema, indent=2) + "\n"
    if updated != text:
        path.write_text(updated)
    return updated != text
