"""What `cdc-bridge run` checks of its settings before it starts anything, for `config check` to
check the same: the secret files can be read, the CQL TLS material loads, librdkafka accepts
every `kafka.*` setting (`check_as_run_would`, no connection); and, over a cluster session, that
each table has the CDC image options its `cdc.include.before`/`after` need
(`check_tables_as_run_would`). Raises `ConfigError(key, reason)`."""

from __future__ import annotations

from typing import Any

from bridge.kafka.access import check_client_settings
from bridge.kafka.errors import KafkaSettingError
from bridge.scylla.table_schema import load_cdc_options
from bridge.settings.errors import ConfigError
from bridge.settings.model import BridgeConfig
from bridge.settings.output_format import image_option_problem, needs_table_options


def check_as_run_would(config: BridgeConfig) -> None:
    kafka = config.kafka_client_config()
    config.scylla_password_value()
    config.scylla_ssl_context()
    try:
        check_client_settings(kafka)
    except KafkaSettingError as error:
        raise ConfigError(error.key, error.reason) from None


def needs_cluster_checks(config: BridgeConfig) -> bool:
    """Whether `check_tables_as_run_would` has anything to check (only then does `config check`
    connect to the cluster)."""
    return needs_table_options(config.include_before, config.include_after)


def check_tables_as_run_would(config: BridgeConfig, session: Any) -> list[str]:
    """Each table's CDC options against the image modes (the Java connector's
    `CdcTableOptionsValidator`); raises the first problem as `ConfigError`. Returns the tables
    that do not exist: not checked here (the connector only warns; `run` refuses them as
    `scylla.table.names` when it plans its tables, as it always has)."""
    if not needs_cluster_checks(config):
        return []
    missing = []
    for keyspace, table in config.tables():
        options = load_cdc_options(session, keyspace, table, config.tablets_metadata_keyspace)
        if options is None:
            missing.append(f"{keyspace}.{table}")
            continue
        problem = image_option_problem(keyspace, table, options, config.include_before, config.include_after)
        if problem is not None:
            raise problem
    return missing
