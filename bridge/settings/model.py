"""The bridge's settings: one frozen model whose fields are the table of every setting.

Each field's alias is the property name users write (the Java connector's where the meaning is
the same, design.md 2.1); its default and description are the documentation (`cdc-bridge config
describe` and the README reference are rendered from them). `load.py` fills it from the file,
the environment and `--set`. Secrets are `SecretStr`: masked in `str`, `repr` and `describe`,
unwrapped only where a client is built. The value checks are the field types of
`field_types.py` and `output_format.py`; which `kafka.*` settings are secrets, `masking.py`. The
methods below the fields are the derived settings each layer is built from.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from bridge.envelope.names import NameAdjustment
from bridge.envelope.settings import ConverterKind, EnvelopeSettings, IncludeMode, OutputFormat, key_placement
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.tls import CqlTlsSettings, TlsSettingError, ssl_context
from bridge.settings.errors import ConfigError
from bridge.settings.field_types import (
    ChannelsText,
    ConsistencyLevelText,
    ConverterText,
    ExpiredModeText,
    FailureModeText,
    KafkaSettings,
    KeyAuthSourceText,
    NameAdjustmentText,
    PemBundlePath,
    ProcessesText,
    SnapshotModeText,
    TlsProviderText,
    UserInfo,
    ValueAuthSourceText,
)
from bridge.settings.jaas import librdkafka_settings
from bridge.settings.masking import MASK, is_kafka_secret, is_secret_file, masked_url
from bridge.settings.output_format import IncludeModeText, OutputFormatText, PayloadKeyNameText, PlacementText
from bridge.settings.rest_listeners import ClientAuthText, ListenersText

Millis = Annotated[int, Field(ge=0)]


def _setting(alias: str, default: Any, description: str, **extra: Any) -> Any:
    return Field(default, alias=alias, description=description, **extra)


class BridgeConfig(BaseModel):
    """Every setting of `cdc-bridge run` (durations in milliseconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False, hide_input_in_errors=True)

    name: str = Field(alias="name", min_length=1, description="Connector name: the offsets key namespace and "
                      "the default prefix of the offsets, slots and transactional ids (required).")
    topic_prefix: str = Field(alias="topic.prefix", min_length=1,
                              description="Topics are <topic.prefix>.<keyspace>.<table> (required).")
    cluster_addresses: str = Field(alias="scylla.cluster.ip.addresses", min_length=1,
                                   description="Contact points, comma-separated host:port (required).")
    table_names: str = Field(alias="scylla.table.names", min_length=1,
                             description="CDC tables to read, comma-separated keyspace.table (required).")
    scylla_user: str | None = _setting("scylla.user", None, "CQL user name.")
    scylla_password: SecretStr | None = _setting("scylla.password", None, "CQL password (secret).")
    scylla_password_file: Path | None = _setting("scylla.password.file", None,
                                                 "File holding the CQL password (Kubernetes Secret mounts).")
    ssl_enabled: bool = _setting("scylla.ssl.enabled", False, "TLS to the CQL cluster.")
    ssl_provider: TlsProviderText = _setting(
        "scylla.ssl.provider", "JDK", "Accepted for the Java connector's configs (JDK, OPENSSL, OPENSSL_REFCNT); the "
        "bridge always uses OpenSSL.")
    ssl_truststore_path: Path | None = _setting("scylla.ssl.truststore.path", None, "CA certificates that "
                                                "sign the nodes' certificates: PEM or PKCS#12 (not JKS); "
                                                "default: the system's CAs.")
    ssl_truststore_password: SecretStr | None = _setting("scylla.ssl.truststore.password", None,
                                                         "Password of a PKCS#12 truststore (secret).")
    ssl_keystore_path: Path | None = _setting("scylla.ssl.keystore.path", None, "Client key and "
                                              "certificate as PKCS#12, for clusters that require one.")
    ssl_keystore_password: SecretStr | None = _setting("scylla.ssl.keystore.password", None,
                                                       "Password of the keystore (secret).")
    ssl_cert_chain: Path | None = _setting("scylla.ssl.openssl.keyCertChain", None,
                                           "Client certificate chain, PEM (instead of a keystore).")
    ssl_private_key: Path | None = _setting("scylla.ssl.openssl.privateKey", None,
                                            "Client private key, unencrypted PEM (with keyCertChain).")
    ssl_cipher_suites: str | None = _setting("scylla.ssl.cipherSuites", None, "Allowed TLS 1.2 cipher suites, "
                                             "comma-separated OpenSSL names; default: OpenSSL's.")
    ssl_hostname_validation: bool = _setting("scylla.ssl.hostname.validation", True, "Check that each "
                                             "node's certificate names the address connected to.")
    local_dc: str | None = _setting("scylla.local.dc", None, "Datacenter for DC-aware load balancing.")
    consistency_level: ConsistencyLevelText = _setting(
        "scylla.consistency.level", "QUORUM", "Consistency level of log reads.")
    query_time_window_size: Millis = _setting("scylla.query.time.window.size", 30_000,
                                              "First window size of a group that is behind (ms).")
    confidence_window_size: int = _setting("scylla.confidence.window.size", 30_000,
                                           "Never read log rows newer than now minus this (ms); at least 1: "
                                           "writes reach the log up to their client timestamp late.", ge=1)
    minimal_wait_for_window_time: Millis = _setting("scylla.minimal.wait.for.window.time", 0,
                                                    "Least pause between two windows of one group (ms).")
    initial_lookback_ms: Millis = _setting("scylla.initial.lookback.ms", 0, "Without saved offsets start at "
                                           "now minus this (ms); 0: the oldest data within the log TTL.")
    vnodes_metadata_keyspace: str = _setting("scylla.cdc.metadata.vnodes.keyspace", "system_distributed",
                                             "Keyspace of the vnode CDC generation tables.")
    tablets_metadata_keyspace: str = _setting("scylla.cdc.metadata.tablets.keyspace", "system",
                                              "Keyspace of the tablet CDC stream tables.")
    output_format: OutputFormatText = _setting(
        "cdc.output.format", "legacy", "legacy ({\"value\": ..} cells, the default) or advanced (the Java "
        "connector 2.x's plain values, before/after from the table's pre-/post-images).")
    include_before: IncludeModeText = _setting(
        "cdc.include.before", "none", "Advanced: before from the pre-image: none, full or only-updated (needs "
        "the table option 'preimage': true, checked at start).")
    include_after: IncludeModeText = _setting(
        "cdc.include.after", "none", "Advanced: after from the post-image: none, full or only-updated (needs "
        "the table option 'postimage': true, checked at start).")
    key_placement: PlacementText = _setting(
        "cdc.include.primary-key.placement", "kafka-key,payload-after,payload-before", "Advanced: where the "
        "key columns go, any of kafka-key, payload-after, payload-before, payload-key, kafka-headers "
        "(payload-diff: accepted, no effect).")
    payload_key_name: PayloadKeyNameText = _setting("cdc.include.primary-key.payload-key-name", "key", "Advanced: the "
                                     "envelope field that holds the key struct with payload-key.")
    incomplete_task_timeout_ms: int = _setting("cdc.incomplete.task.timeout.ms", 15_000, "Accepted as the "
                                               "connector's: the bridge reads each change whole, so a change "
                                               "never waits for its images (a missing image is null, logged "
                                               "and counted).", ge=1)
    preimages: bool = _setting("experimental.preimages.enabled", False, "Fill `before` from pre-images.")
    postimages: bool = _setting("experimental.postimages.enabled", False, "Fill `after` from post-images.")
    tombstones_on_delete: bool = _setting("tombstones.on.delete", True, "A tombstone follows every delete.")
    offsets_expired_mode: ExpiredModeText = _setting(
        "scylla.offsets.expired.mode", "fail", "A saved position older than the log's TTL (rows may have expired "
        "unread): fail (the group stops, visible in /readyz, like Debezium refusing a gap) or resume (stream on from "
        "it, the gap logged and counted).")
    snapshot_mode: SnapshotModeText = _setting(
        "snapshot.mode", "no_data", "Rows that existed before CDC: no_data (stream only; never is its old name), "
        "initial (a table without saved offsets is snapshotted, then streamed), initial_only (snapshotted, not "
        "streamed) or when_needed (as initial, and a saved position older than the log's TTL is closed by a snapshot).")
    snapshot_fetch_size: int = _setting("snapshot.fetch.size", 1_000, "Rows per page of a snapshot read.", ge=1)
    snapshot_max_threads: int = _setting("snapshot.max.threads", 2, "Groups one worker snapshots at once, one "
                                         "page in flight each: the snapshot's load on the cluster.", ge=1)
    signal_channels: ChannelsText = _setting(
        "signal.enabled.channels", "", "Where snapshot signals come from: kafka (the signal.kafka.topic), or empty for "
        "none.")
    signal_kafka_topic: str | None = _setting("signal.kafka.topic", None, "Topic of Debezium signals "
                                              "(execute-snapshot, stop-snapshot) keyed by topic.prefix; default "
                                              "<name>-signals.")
    notification_channels: ChannelsText = _setting(
        "notification.enabled.channels", "", "Where snapshot notifications go: kafka (sink, Debezium's name, accepted) "
        "for the notification.sink.topic.name, or empty for none.")
    notification_topic: str | None = _setting("notification.sink.topic.name", None, "Topic of Debezium "
                                              "notifications of snapshots (STARTED, IN_PROGRESS, COMPLETED per "
                                              "group); default <name>-notifications.")
    failure_handling_mode: FailureModeText = _setting(
        "event.processing.failure.handling.mode", "fail", "A change the bridge cannot translate or serialize: fail "
        "(its group stops and is retried, visible in /readyz), warn or skip (logged, counted, passed; to the dead "
        "letter topic when one is set).")
    dead_letter_topic: str | None = _setting("errors.deadletterqueue.topic.name", None, "Topic for the changes "
                                             "warn or skip passes (as read, with the reason and position).")
    errors_retry_timeout: int = _setting("errors.retry.timeout", -1, "How long a failed group is retried from its "
                                         "last commit (ms): -1 for ever, 0 never (it stays failed; /readyz "
                                         "says so).", ge=-1)
    errors_retry_delay_max_ms: int = _setting("errors.retry.delay.max.ms", 60_000, "Longest wait between two "
                                              "retries of a failed group (ms); the first waits 1 s, each next "
                                              "twice as long.", ge=1)
    heartbeat_interval_ms: Millis = _setting("heartbeat.interval.ms", 10_000, "How often positions of groups "
                                             "that only advanced (no records) are committed (ms).")
    key_converter: ConverterText = _setting("key.converter", "json", "json or avro (Connect class names accepted).")
    value_converter: ConverterText = _setting("value.converter", "json", "json or avro (Connect class names accepted).")
    key_schemas_enable: bool = _setting("key.converter.schemas.enable", True, "JSON keys with their schema.")
    value_schemas_enable: bool = _setting("value.converter.schemas.enable", True, "JSON values with their schema.")
    key_registry_url: str | None = _setting("key.converter.schema.registry.url", None, "Registry for Avro keys.")
    value_registry_url: str | None = _setting("value.converter.schema.registry.url", None,
                                              "Registry for Avro values.")
    key_registry_user_info: UserInfo = _setting(
        "key.converter.basic.auth.user.info", None, "user:password for the key registry (secret).")
    key_registry_auth_source: KeyAuthSourceText = _setting(
        "key.converter.basic.auth.credentials.source", "URL", "Registry basic-auth credentials from the URL "
        "(user:password@) or USER_INFO (key.converter.basic.auth.user.info).")
    key_registry_ca: PemBundlePath = _setting(
        "key.converter.schema.registry.ssl.truststore.location", None, "PEM CA bundle the key registry's HTTPS "
        "certificate chains to (default: the system's).")
    value_registry_user_info: UserInfo = _setting(
        "value.converter.basic.auth.user.info", None, "user:password for the value registry (secret).")
    value_registry_auth_source: ValueAuthSourceText = _setting(
        "value.converter.basic.auth.credentials.source", "URL", "As key.converter.basic.auth.credentials.source, for "
        "values.")
    value_registry_ca: PemBundlePath = _setting(
        "value.converter.schema.registry.ssl.truststore.location", None, "PEM CA bundle the value registry's HTTPS "
        "certificate chains to.")
    dropped_changes_topic: str | None = _setting("dropped.changes.topic", None,
                                                 "Side topic for range and clustered partition deletes.")
    schema_name_adjustment_mode: NameAdjustmentText = _setting(
        "schema.name.adjustment.mode", "avro", "Struct names: none, avro (invalid characters as _) or avro_unicode (as "
        "_uXXXX).")
    field_name_adjustment_mode: NameAdjustmentText = _setting(
        "field.name.adjustment.mode", "avro", "Avro field names: none, avro or avro_unicode; JSON keeps the column "
        "names.")
    offset_storage_topic: str | None = _setting("offset.storage.topic", None,
                                                "Compacted offsets topic; default <name>-offsets.")
    offset_storage_partitions: int = _setting("offset.storage.partitions", 25, "Partitions of a new offsets "
                                              "topic.", ge=1)
    offset_storage_replication_factor: int = _setting("offset.storage.replication.factor", -1,
                                                      "Replication of a new offsets topic; -1: broker default.")
    status_storage_topic: str | None = _setting("status.storage.topic", None, "Compacted topic where each worker "
                                                "lists its failed groups (for cdc-bridge status); default "
                                                "<name>-status.")
    config_storage_topic: str | None = _setting("config.storage.topic", None, "Compacted control topic (one "
                                                "partition) holding the connector's target state (STARTED, PAUSED, "
                                                "STOPPED) and restart requests, followed by every worker; default "
                                                "<name>-config.")
    slots_topic: str | None = _setting("slots.topic", None, "Topic whose partitions are the slots; default "
                                       "<name>-slots.")
    slots_count: int = _setting("slots.count", 64, "Slots (partitions of the slots topic) groups map onto.", ge=1)
    worker_instance_id: str | None = _setting("worker.instance.id", None, "Stable id of this worker (static "
                                              "group membership), e.g. the pod name.")
    worker_processes: ProcessesText = _setting(
        "worker.processes", "1", "Worker processes this run starts (each one interpreter, one core): a positive "
        "number, or auto for the CPUs this process may use (affinity, cgroup cpu.max), the choice in a container with "
        "its own CPU limit. Above 1 a supervisor runs them, serves metrics.port and restarts any that dies; with "
        "worker.instance.id X, process i is X-i.")
    commit_interval_ms: int = _setting("commit.interval.ms", 100, "Longest time a transaction stays open "
                                       "(ms).", ge=10)
    commit_max_records: int = _setting("commit.max.records", 5_000, "Records after which a transaction is "
                                       "committed.", ge=1)
    shutdown_timeout_ms: int = _setting("shutdown.timeout.ms", 30_000, "Bound on a graceful stop (ms).", ge=1)
    startup_timeout_ms: int = _setting("startup.timeout.ms", 300_000, "How long start-up waits, retrying with "
                                       "back-off, for a Kafka or Scylla that does not answer (or topics not yet "
                                       "published) before the worker exits (ms); a configuration error exits at "
                                       "once.", ge=0)
    metrics_port: int = _setting("metrics.port", 9404, "Port of /metrics, /healthz, /readyz; 0: off.",
                                 ge=0, le=65535)
    # every interface by default: kubelet probes and Prometheus come from outside the container
    metrics_bind_address: str = _setting("metrics.bind.address", "0.0.0.0", "Address the metrics port listens "  # noqa: S104
                                         "on: 0.0.0.0 (every interface, for containers and probes), :: (IPv6 "
                                         "too), or one address, e.g. 127.0.0.1 behind a local proxy.",
                                         min_length=1)
    listeners: ListenersText = _setting(
        "listeners", "", "Kafka Connect's REST API: comma-separated http://host:port or https://host:port, e.g. "
        "http://0.0.0.0:8083; empty: not served. Without rest.auth.credentials.file a listener on an address other "
        "than loopback answers reads only.")
    rest_keystore: Path | None = _setting("listeners.https.ssl.keystore.location", None, "https listeners: PEM "
                                          "file with the server's certificate chain (and its unencrypted private "
                                          "key, unless listeners.https.ssl.key.location is set).")
    rest_key: Path | None = _setting("listeners.https.ssl.key.location", None, "https listeners: PEM file with the "
                                     "server's unencrypted private key, when it is not in the keystore file.")
    rest_truststore: Path | None = _setting("listeners.https.ssl.truststore.location", None, "https listeners: "
                                            "PEM CA bundle that client certificates must chain to.")
    rest_client_auth: ClientAuthText = _setting("listeners.https.ssl.client.auth", "none", "https listeners: "
                                                "client certificates none, requested or required.")
    rest_credentials_file: Path | None = _setting(
        "rest.auth.credentials.file", None, "REST basic auth: a file of 'user: password' lines (Connect's "
        "PropertyFileLoginModule file, e.g. a mounted Secret); when set, nothing answers without them (401).")
    kafka: KafkaSettings = Field(default_factory=dict, alias="kafka.*", description="Kafka client "
                                 "settings (librdkafka names) under the prefix kafka., e.g. "
                                 "kafka.bootstrap.servers (required), kafka.security.protocol, "
                                 "kafka.sasl.mechanism, kafka.sasl.username, kafka.sasl.password, "
                                 "kafka.ssl.ca.location; kafka.<secret>.file reads a secret from a file "
                                 "(kafka.sasl.password.file).")

    # ------------------------------------------------------------------ derived settings

    @property
    def offsets_topic(self) -> str:
        return self.offset_storage_topic or f"{self.name}-offsets"

    @property
    def status_topic(self) -> str:
        return self.status_storage_topic or f"{self.name}-status"

    @property
    def config_topic(self) -> str:
        return self.config_storage_topic or f"{self.name}-config"

    @property
    def signals_topic(self) -> str | None:
        """The signals topic when the kafka channel is on."""
        return (self.signal_kafka_topic or f"{self.name}-signals") if self.signal_channels else None

    @property
    def notifications_topic(self) -> str | None:
        """The notifications topic when the kafka channel is on."""
        return (self.notification_topic or f"{self.name}-notifications") if self.notification_channels else None

    @property
    def slots_topic_name(self) -> str:
        return self.slots_topic or f"{self.name}-slots"

    def tables(self) -> list[tuple[str, str]]:
        return [_table(part) for part in self.table_names.split(",") if part.strip()]

    def scylla_contact_points(self) -> list[tuple[str, int]]:
        return [_address(part) for part in self.cluster_addresses.split(",") if part.strip()]

    def scylla_password_value(self) -> str | None:
        if self.scylla_password_file is not None:
            return _read_secret("scylla.password.file", self.scylla_password_file)
        return self.scylla_password.get_secret_value() if self.scylla_password else None

    def scylla_ssl_context(self) -> ssl.SSLContext | None:
        """The CQL driver's TLS context (None when `scylla.ssl.enabled` is false)."""
        def unwrap(secret: SecretStr | None) -> str | None:
            return secret.get_secret_value() if secret is not None else None

        try:
            return ssl_context(CqlTlsSettings(
                enabled=self.ssl_enabled, truststore_path=self.ssl_truststore_path,
                truststore_password=unwrap(self.ssl_truststore_password), keystore_path=self.ssl_keystore_path,
                keystore_password=unwrap(self.ssl_keystore_password), cert_chain=self.ssl_cert_chain,
                private_key=self.ssl_private_key, cipher_suites=self.ssl_cipher_suites,
                hostname_validation=self.ssl_hostname_validation))
        except TlsSettingError as error:
            raise ConfigError(error.key, error.reason) from None

    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka settings, secrets unwrapped: `kafka.<secret>.file` (e.g. `kafka.sasl.password.file`,
        a Kubernetes Secret mounted as a file) is read here into `<secret>`, and Kafka Connect's
        `kafka.sasl.jaas.config` becomes librdkafka's SASL settings (`jaas.py`)."""
        config = {key: value.get_secret_value() for key, value in self.kafka.items()}
        for name in [key for key in config if is_secret_file(key)]:
            config[name.removesuffix(".file")] = _read_secret(f"kafka.{name}", Path(config.pop(name)))
        if "sasl.jaas.config" in config:  # Kafka Connect's form; settings given directly win
            try:
                translated = librdkafka_settings(config.pop("sasl.jaas.config"))
            except ValueError as error:
                raise ConfigError("kafka.sasl.jaas.config", str(error)) from None
            config = translated | config
        return config

    def reader_settings(self) -> ReaderSettings:
        return ReaderSettings(
            confidence_window_size_ms=self.confidence_window_size,
            query_time_window_size_ms=self.query_time_window_size,
            minimal_wait_for_window_time_ms=self.minimal_wait_for_window_time,
            consistency_level=self.consistency_level,
            initial_lookback_ms=self.initial_lookback_ms,
            vnodes_metadata_keyspace=self.vnodes_metadata_keyspace,
            tablets_metadata_keyspace=self.tablets_metadata_keyspace,
            snapshot_mode=self.snapshot_mode,
            snapshot_fetch_size=self.snapshot_fetch_size,
            snapshot_max_threads=self.snapshot_max_threads,
        )

    def registry_client_config(self, url: str) -> dict[str, str]:
        """The schema registry client's settings (auth, CA) for the side whose URL is `url`."""
        key_side = url == self.key_registry_url
        source = self.key_registry_auth_source if key_side else self.value_registry_auth_source
        user_info = self.key_registry_user_info if key_side else self.value_registry_user_info
        ca = self.key_registry_ca if key_side else self.value_registry_ca
        config = {}
        if source == "USER_INFO" and user_info is not None:  # the validator made sure it is there
            config["basic.auth.user.info"] = user_info.get_secret_value()
        if ca is not None:
            config["ssl.ca.location"] = str(ca)
        return config

    def envelope_settings(self) -> EnvelopeSettings:
        return EnvelopeSettings(
            topic_prefix=self.topic_prefix,
            cdc_output_format=OutputFormat(self.output_format),
            cdc_include_before=IncludeMode(self.include_before),
            cdc_include_after=IncludeMode(self.include_after),
            cdc_include_primary_key_placement=key_placement(self.key_placement),
            cdc_include_primary_key_payload_key_name=self.payload_key_name,
            cdc_incomplete_task_timeout_ms=self.incomplete_task_timeout_ms,
            experimental_preimages_enabled=self.preimages,
            experimental_postimages_enabled=self.postimages,
            tombstones_on_delete=self.tombstones_on_delete,
            key_converter=ConverterKind(self.key_converter),
            value_converter=ConverterKind(self.value_converter),
            key_converter_schemas_enable=self.key_schemas_enable,
            value_converter_schemas_enable=self.value_schemas_enable,
            key_converter_schema_registry_url=self.key_registry_url,
            value_converter_schema_registry_url=self.value_registry_url,
            dropped_changes_topic=self.dropped_changes_topic,
            schema_name_adjustment_mode=NameAdjustment(self.schema_name_adjustment_mode),
            field_name_adjustment_mode=NameAdjustment(self.field_name_adjustment_mode),
        )

    def describe(self) -> Iterator[tuple[str, str, str, str]]:
        """(key, effective value, default, meaning) of every setting; secrets masked."""
        for field_name, info in type(self).model_fields.items():
            key = info.alias or field_name
            if key == "kafka.*":
                for name, secret in sorted(self.kafka.items()):
                    shown = MASK if is_kafka_secret(name) else secret.get_secret_value()
                    yield f"kafka.{name}", shown, "", "Kafka client setting"
                continue
            value = getattr(self, field_name)
            shown = MASK if isinstance(value, SecretStr) else ("" if value is None else masked_url(setting_text(value)))
            default = "" if info.is_required() else setting_text(info.default)
            yield key, shown, default, info.description or ""


def setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _table(text: str) -> tuple[str, str]:
    keyspace, dot, table = text.strip().partition(".")
    if not (dot and keyspace and table):
        raise ValueError(f"{text.strip()!r} is not keyspace.table")
    return keyspace, table


def _address(text: str) -> tuple[str, int]:
    host, colon, port = text.strip().rpartition(":")
    if not colon:
        return text.strip(), 9042
    if not port.isdigit() or not host:
        raise ValueError(f"{text.strip()!r} is not host:port")
    return host.strip("[]"), int(port)


def _read_secret(key: str, path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as error:
        raise ConfigError(key, f"cannot read {path}: {error.strerror}") from None

