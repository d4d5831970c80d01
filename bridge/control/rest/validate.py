"""`PUT /connector-plugins/{plugin}/config/validate` and `GET /connector-plugins/{plugin}/config`
(pure): Kafka Connect's ConfigInfos, one entry per setting of the settings model, each with the
errors `config check` would give it. Keys that are not settings (a UI's `topics`, Connect's
`tasks.max`) are reported as entries of their own, never a 500; Connect answers 200 even when
the config has errors, with `error_count`."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import SecretStr, ValidationError

from bridge.control.rest.shapes import CONNECTOR_CLASS
from bridge.settings import BridgeConfig, ConfigError
from bridge.settings.load import build_config
from bridge.settings.masking import is_kafka_secret
from bridge.settings.model import setting_text

GROUP = "Common"
HIDDEN = "[hidden]"  # how Connect shows a PASSWORD value in a validate answer
PLUGIN_ALIASES = (CONNECTOR_CLASS, "ScyllaCdcBridge", "ScyllaCdcBridgeConnector")
# Connect's own connector keys a UI may send: taken, not ours to check (tasks are the slots).
CONNECT_KEYS = {"connector.class", "tasks.max", "name"}


def _connect_type(annotation: Any) -> str:
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    if annotation is SecretStr:
        return "PASSWORD"
    if annotation is bool:
        return "BOOLEAN"
    if annotation is int:
        return "INT"
    return "STRING"


def definitions() -> list[dict[str, Any]]:
    """Connect's ConfigKeyInfo of every setting (`GET /connector-plugins/{plugin}/config`)."""
    found = []
    for order, (name, info) in enumerate(BridgeConfig.model_fields.items()):
        key = info.alias or name
        found.append({"name": key, "type": _connect_type(info.annotation), "required": info.is_required(),
                      "default_value": None if info.is_required() else setting_text(info.default) or None,
                      "importance": "HIGH" if info.is_required() else "MEDIUM",
                      "documentation": info.description or "", "group": GROUP, "width": "MEDIUM",
                      "display_name": key, "dependents": [], "order": order})
    return found


def config_errors(values: Mapping[str, str]) -> dict[str, list[str]]:
    """The errors per setting of `values` (the worker's settings plus anything a UI sends)."""
    errors: dict[str, list[str]] = {}
    settings = {key: value for key, value in values.items() if key not in CONNECT_KEYS or key == "name"}
    aliases = {info.alias or name for name, info in BridgeConfig.model_fields.items()}
    for key in settings:
        if key not in aliases and not key.startswith("kafka."):
            errors.setdefault(key, []).append("not a setting of this connector (see GET /connector-plugins/"
                                              f"{CONNECTOR_CLASS}/config)")
    plugin = values.get("connector.class")
    if plugin is not None and plugin not in PLUGIN_ALIASES:
        errors.setdefault("connector.class", []).append(f"this worker runs {CONNECTOR_CLASS}, not {plugin}")
    known = {key: value for key, value in settings.items() if key in aliases or key.startswith("kafka.")}
    fields: dict[str, Any] = {key: (value if str(value).strip() != "" else None) for key, value in known.items()
                              if not key.startswith("kafka.")}
    fields["kafka.*"] = {key.removeprefix("kafka."): value for key, value in known.items() if key.startswith("kafka.")}
    try:
        BridgeConfig.model_validate(fields)
    except ValidationError as error:
        for item in error.errors():
            loc = str(item["loc"][0]) if item["loc"] else "name"
            key = "kafka.bootstrap.servers" if loc == "kafka.*" else loc
            message = "required, missing" if item["type"] == "missing" else str(item["msg"]).removeprefix(
                "Value error, ")
            errors.setdefault(key, []).append(message)
        return errors
    try:  # the checks across settings, as `config check` runs them
        build_config({key: str(value) for key, value in known.items()})
    except ConfigError as error:
        errors.setdefault(error.key, []).append(error.reason)
    return errors


def config_infos(values: Mapping[str, Any]) -> dict[str, Any]:
    """Connect's ConfigInfos for `values` (a JSON object of the request body)."""
    text = {str(key): "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in values.items()}
    errors = config_errors(text)
    configs: list[dict[str, Any]] = []
    for definition in definitions():
        key = definition["name"]
        shown: str | None = text.get(key, definition["default_value"])
        if definition["type"] == "PASSWORD" and key in text:
            shown = HIDDEN
        configs.append({"definition": definition, "value": {"name": key, "value": shown, "recommended_values": [],
                                                            "errors": errors.pop(key, []), "visible": True}})
    for key in sorted(set(errors) | (set(text) & CONNECT_KEYS - {"name"})):  # keys that are not settings
        shown = HIDDEN if key.startswith("kafka.") and is_kafka_secret(key.removeprefix("kafka.")) else text.get(key)
        configs.append({"definition": {"name": key}, "value": {"name": key, "value": shown, "recommended_values": [],
                                                      "errors": errors.get(key, []), "visible": True}})
    return {"name": CONNECTOR_CLASS, "error_count": sum(len(item["value"]["errors"]) for item in configs),
            "groups": [GROUP], "configs": configs}
