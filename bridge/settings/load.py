"""Loading the settings: a `.properties` or YAML file, `CDC_BRIDGE_<KEY>` environment variables
(dots as `_`), then `--set key=value`, later ones winning, into one validated `BridgeConfig`.

An unknown key, a missing required key or a bad value raises one `ConfigError` whose text is
`<key>: <reason>`. `load_config` is the one place that reads the process environment.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import javaproperties
from pydantic import ValidationError

from bridge.envelope.errors import SettingsError
from bridge.settings.errors import ConfigError
from bridge.settings.jaas import librdkafka_settings
from bridge.settings.model import BridgeConfig, setting_text

ENV_PREFIX = "CDC_BRIDGE_"
KAFKA_PREFIX = "kafka."
# CDC_BRIDGE_ variables that are not worker settings: the local stack, the emulator, the Spark
# jobs, tests and benchmarks read them.
NOT_SETTINGS = ("CDC_BRIDGE_STACK_", "CDC_BRIDGE_SIM_", "CDC_BRIDGE_SPARK_", "CDC_BRIDGE_IVY_",
                "CDC_BRIDGE_CHAOS_", "CDC_BRIDGE_DEPLOY_", "CDC_BRIDGE_FAULTS_", "CDC_BRIDGE_BENCH_",
                "CDC_BRIDGE_TEST_")

def _aliases() -> dict[str, str]:
    return {(info.alias or name): name for name, info in BridgeConfig.model_fields.items()}


def read_file(path: Path) -> dict[str, str]:
    """Flat `key -> text` from a `.properties` or YAML file (nested YAML maps join with dots)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError("--config", f"cannot read {path}: {error.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark is no part of the first key
    except UnicodeDecodeError:
        # Java reads .properties files as ISO-8859-1 (other characters as \uXXXX escapes, which
        # javaproperties decodes): a file written that way is read as Kafka Connect reads it.
        text = raw.decode("latin-1")
    if path.suffix in (".yaml", ".yml"):
        import yaml  # only for a YAML file: 30 ms of every command's start otherwise

        try:
            loaded = yaml.safe_load(text) or {}
        except yaml.YAMLError as error:
            raise ConfigError("--config", f"{path} is not valid YAML: {error}") from None
        if not isinstance(loaded, dict):
            raise ConfigError("--config", f"{path} must hold a mapping of settings")
        return dict(_flatten(loaded))
    return dict(javaproperties.loads(text))


def _flatten(tree: Mapping[Any, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, setting_text(value)


def from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`CDC_BRIDGE_<KEY>` for every known key (dots and dashes as `_`) and `CDC_BRIDGE_KAFKA_<X>`
    for `kafka.<x>` (lower case, `_` as dots)."""
    by_env = {ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_"): key
              for key in _aliases() if key != "kafka.*"}
    found: dict[str, str] = {}
    for variable, value in environ.items():
        if variable in by_env:
            found[by_env[variable]] = value
        elif variable.startswith(ENV_PREFIX + "KAFKA_"):
            found["kafka." + variable[len(ENV_PREFIX) + 6:].lower().replace("_", ".")] = value
        elif variable.startswith(ENV_PREFIX) and not variable.startswith(NOT_SETTINGS):
            # A typo would otherwise be ignored and the file's (or the default) value used.
            close = difflib.get_close_matches(variable, by_env, n=1)
            hint = (f": did you mean {close[0]} ({by_env[close[0]]})?" if close
                    else " (see `cdc-bridge config reference`)")
            raise ConfigError(variable, f"unknown setting in the environment{hint}")
    return found


def parse_sets(pairs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ConfigError("--set", f"{pair!r} is not key=value")
        found[key.strip()] = value
    return found


def build_config(properties: Mapping[str, str]) -> BridgeConfig:
    aliases = _aliases()
    values: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    for key, value in properties.items():
        if key.startswith(KAFKA_PREFIX) and len(key) > len(KAFKA_PREFIX):
            kafka[key[len(KAFKA_PREFIX):]] = value
        elif key in aliases and key != "kafka.*":
            values[key] = value if value.strip() != "" else None
        else:
            raise ConfigError(key, "unknown setting (see `cdc-bridge config describe`)")
    values["kafka.*"] = kafka
    try:
        config = BridgeConfig.model_validate(values)
        if not config.tables():
            raise ValueError(f"{config.table_names!r} names no keyspace.table")
        config.scylla_contact_points()
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "config"
        key = "kafka.bootstrap.servers" if field == "kafka.*" else field
        raise ConfigError(key, _reason(first)) from None
    except ValueError as error:
        key = "scylla.table.names" if "keyspace.table" in str(error) else "scylla.cluster.ip.addresses"
        raise ConfigError(key, str(error)) from None
    try:  # the layers' own checks (settings that only make sense together); their errors start with the key
        config.envelope_settings()
        config.reader_settings()
    except (SettingsError, ValueError) as error:
        key, _, reason = str(error).partition(": ")
        raise ConfigError(key, reason) from None
    _check_credentials(config)
    _check_tls(config)
    _check_jaas(config)
    return config


def _check_jaas(config: BridgeConfig) -> None:
    jaas = config.kafka.get("sasl.jaas.config")
    if jaas is not None:
        try:
            librdkafka_settings(jaas.get_secret_value())
        except ValueError as error:
            raise ConfigError("kafka.sasl.jaas.config", str(error)) from None


def _check_tls(config: BridgeConfig) -> None:
    if config.ssl_enabled:
        return
    files = {"scylla.ssl.truststore.path": config.ssl_truststore_path, "scylla.ssl.keystore.path":
             config.ssl_keystore_path, "scylla.ssl.openssl.keyCertChain": config.ssl_cert_chain,
             "scylla.ssl.openssl.privateKey": config.ssl_private_key}
    given = [key for key, value in files.items() if value is not None]
    if given:
        raise ConfigError("scylla.ssl.enabled", f"false, but {given[0]} is set: set scylla.ssl.enabled=true to "
                                                "use TLS, or remove the TLS files")


def _check_credentials(config: BridgeConfig) -> None:
    # As the Java connector's validate(): a user without a password (or the reverse) is a mistake.
    has_password = config.scylla_password is not None or config.scylla_password_file is not None
    if config.scylla_user and not has_password:
        raise ConfigError("scylla.password", "required when scylla.user is set (or scylla.password.file)")
    if has_password and not config.scylla_user:
        raise ConfigError("scylla.user", "required when scylla.password or scylla.password.file is set")
    if config.scylla_password is not None and config.scylla_password_file is not None:
        raise ConfigError("scylla.password.file", "set either scylla.password or scylla.password.file, not both")


def _reason(error: Any) -> str:
    if error["type"] == "missing":
        return "required, missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message[0].lower() + message[1:] if message else "invalid"


def load_config(
    path: Path | None,
    *,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BridgeConfig:
    properties = read_file(path) if path is not None else {}
    properties.update(from_environment(os.environ if environ is None else environ))
    properties.update(overrides or {})
    return build_config(properties)
