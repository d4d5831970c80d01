"""What `cdc-bridge run` checks of its settings before it connects anywhere, for `config check` to
check the same: the secret files can be read, the CQL TLS material loads, librdkafka accepts
every `kafka.*` setting. Raises `ConfigError(key, reason)`."""

from __future__ import annotations

from bridge.kafka.access import check_client_settings
from bridge.kafka.errors import KafkaSettingError
from bridge.settings.errors import ConfigError
from bridge.settings.model import BridgeConfig


def check_as_run_would(config: BridgeConfig) -> None:
    kafka = config.kafka_client_config()
    config.scylla_password_value()
    config.scylla_ssl_context()
    try:
        check_client_settings(kafka)
    except KafkaSettingError as error:
        raise ConfigError(error.key, error.reason) from None
