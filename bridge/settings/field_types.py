"""The value checks of the settings, as field types of the model (bridge/settings/model.py): each
type checks a value and normalizes it (upper or lower case, aliases to their one name), or refuses
it with the reason `cdc-bridge` prints after the setting's key. The output-format settings'
types are in `output_format.py`.

Checks that read another setting (the registry's credentials source) read it from the values
already checked, so the model declares that setting first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, SecretStr, ValidationInfo

from bridge.envelope.names import name_adjustment
from bridge.envelope.settings import converter_kind
from bridge.scylla.settings import CONSISTENCY_LEVELS, SNAPSHOT_MODES
from bridge.scylla.tls import PROVIDERS
from bridge.settings.masking import url_password


def _one_of(*allowed: str, upper: bool = False) -> AfterValidator:
    """One of `allowed`, in any case; kept in the case `allowed` is written in."""
    def check(value: str) -> str:
        normal = value.upper() if upper else value.lower()
        if normal not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return normal
    return AfterValidator(check)


def _snapshot_mode(value: str) -> str:
    mode = "no_data" if value.lower() == "never" else value.lower()
    if mode not in SNAPSHOT_MODES:
        raise ValueError(f"must be one of {', '.join(SNAPSHOT_MODES)}")
    return mode


def _channels(value: str) -> str:
    """Debezium's channel lists; only Kafka is a channel here (`sink` is Debezium's name for
    notifications on Kafka; a CDC log has no signalling table)."""
    channels = {"kafka" if part.strip().lower() == "sink" else part.strip().lower()
                for part in value.split(",") if part.strip()}
    if channels - {"kafka"}:
        raise ValueError(f"{', '.join(sorted(channels - {'kafka'}))}: only the kafka channel is supported")
    return ",".join(sorted(channels))


def _processes(value: object) -> str:
    """`auto` or a positive integer, kept as text: `auto` is resolved where the processes are
    started (bridge/worker/cpus.py), so `config describe` shows what was written."""
    text = "" if value is None else str(value).strip().lower()  # an empty value arrives as None
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{'' if value is None else str(value).strip()!r}: must be a positive integer or auto")
    return str(int(text))


def _converter(value: str) -> str:
    return converter_kind(value).value


def _adjustment(value: str) -> str:
    return name_adjustment(value).value


def _auth_source(side: str) -> AfterValidator:
    """`<side>.converter.basic.auth.credentials.source`: URL or USER_INFO, the latter with its user
    info set (declared before it) and no second set of credentials in the registry URL."""
    def check(value: str, info: ValidationInfo) -> str:
        if value.upper() not in ("URL", "USER_INFO"):
            raise ValueError("must be URL or USER_INFO (SASL_INHERIT is not supported)")
        if value.upper() == "USER_INFO" and info.data.get(f"{side}_registry_user_info") is None:
            raise ValueError(f"is USER_INFO, but {side}.converter.basic.auth.user.info (user:password) is not set")
        if value.upper() == "USER_INFO" and url_password(info.data.get(f"{side}_registry_url") or ""):
            raise ValueError(f"is USER_INFO, but {side}.converter.schema.registry.url has credentials too: keep one")
        return value.upper()
    return AfterValidator(check)


def _user_info(value: SecretStr | None) -> SecretStr | None:
    if value is not None and ":" not in value.get_secret_value():
        raise ValueError("must be user:password")
    return value


def _pem_bundle(value: Path | None) -> Path | None:
    if value is None:
        return None
    try:
        head = value.read_bytes()[:4096]
    except OSError as error:
        raise ValueError(f"{value}: {error.strerror or error}") from None
    if b"-----BEGIN CERTIFICATE-----" not in head:
        raise ValueError(f"{value} is not a PEM CA bundle (a JKS or PKCS#12 truststore converts with "
                         f"`openssl pkcs12 -in {value.name} -nokeys -out ca.pem`)")
    return value


def _bootstrap(value: dict[str, SecretStr]) -> dict[str, SecretStr]:
    if "bootstrap.servers" not in value:
        raise ValueError("required, missing")
    return value


ConsistencyLevelText = Annotated[str, _one_of(*sorted(CONSISTENCY_LEVELS), upper=True)]
FailureModeText = Annotated[str, _one_of("fail", "warn", "skip")]
ExpiredModeText = Annotated[str, _one_of("fail", "resume")]
SnapshotModeText = Annotated[str, AfterValidator(_snapshot_mode)]  # `never` as `no_data`
ChannelsText = Annotated[str, AfterValidator(_channels)]  # sorted, `sink` as `kafka`
ProcessesText = Annotated[str, BeforeValidator(_processes)]
TlsProviderText = Annotated[str, _one_of(*sorted(PROVIDERS), upper=True)]
ConverterText = Annotated[str, AfterValidator(_converter)]  # json or avro
NameAdjustmentText = Annotated[str, AfterValidator(_adjustment)]
KeyAuthSourceText = Annotated[str, _auth_source("key")]
ValueAuthSourceText = Annotated[str, _auth_source("value")]
UserInfo = Annotated[SecretStr | None, AfterValidator(_user_info)]
PemBundlePath = Annotated[Path | None, AfterValidator(_pem_bundle)]
KafkaSettings = Annotated[dict[str, SecretStr], AfterValidator(_bootstrap)]  # kafka.bootstrap.servers required
