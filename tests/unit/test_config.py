"""Settings: one line naming the key for every problem; sources and secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.envelope.names import NameAdjustment
from bridge.envelope.settings import ConverterKind, EnvelopeSettings
from bridge.settings import ConfigError, load_config, parse_sets
from bridge.settings.load import build_config
from bridge.settings.reference import render_reference

BASE = {
    "name": "c1",
    "topic.prefix": "p",
    "scylla.cluster.ip.addresses": "10.0.0.1:9042,10.0.0.2:19042",
    "scylla.table.names": "ks.t1, ks.t2",
    "kafka.bootstrap.servers": "k:9092",
}


def with_(**changes: str | None) -> dict[str, str]:
    props = dict(BASE)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return props


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (with_(**{"scylla.nope": "1"}), "scylla.nope: unknown setting"),
        (with_(**{"topic.prefix": None}), "topic.prefix: required, missing"),
        (with_(**{"scylla.confidence.window.size": "soon"}), "scylla.confidence.window.size: input should be"),
        (with_(**{"scylla.confidence.window.size": "-5"}), "scylla.confidence.window.size: input should be greater"),
        (with_(**{"scylla.consistency.level": "MOST"}), "scylla.consistency.level: must be one of"),
        (with_(**{"value.converter": "protobuf"}), "value.converter: unknown converter"),
        (with_(**{"scylla.table.names": "just_a_table"}), "scylla.table.names: 'just_a_table' is not keyspace.table"),
        (with_(**{"scylla.cluster.ip.addresses": "h:port"}), "scylla.cluster.ip.addresses: 'h:port' is not host:port"),
        (with_(**{"kafka.bootstrap.servers": None}), "kafka.bootstrap.servers: required, missing"),
        (with_(**{"tombstones.on.delete": "maybe"}), "tombstones.on.delete: input should be a valid boolean"),
        (with_(**{"key.converter": "avro"}), "key.converter.schema.registry.url: required when key.converter is avro"),
        (with_(**{"field.name.adjustment.mode": "x"}), "field.name.adjustment.mode: unknown adjustment mode 'x'"),
        (with_(**{"snapshot.mode": "always"}), "snapshot.mode: must be one of no_data, initial, initial_only"),
        (with_(**{"snapshot.fetch.size": "0"}), "snapshot.fetch.size: input should be greater"),
        (with_(**{"signal.enabled.channels": "source,kafka"}), "signal.enabled.channels: source: only the kafka"),
        (with_(**{"notification.enabled.channels": "jmx"}), "notification.enabled.channels: jmx: only the kafka"),
    ],
)
def test_each_bad_setting_is_one_line_naming_its_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_config(props)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_envelope_settings_come_from_the_connector_property_names() -> None:
    config = build_config(with_(**{
        "experimental.preimages.enabled": "true",
        "experimental.postimages.enabled": "TRUE",
        "tombstones.on.delete": "false",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://registry:8080/apis/ccompat/v7",
        "dropped.changes.topic": "orders.dropped",
        "schema.name.adjustment.mode": "AVRO_UNICODE",
        "field.name.adjustment.mode": "none",
    }))
    assert config.envelope_settings() == EnvelopeSettings(
        topic_prefix="p",
        experimental_preimages_enabled=True,
        experimental_postimages_enabled=True,
        tombstones_on_delete=False,
        key_converter=ConverterKind.JSON,
        value_converter=ConverterKind.AVRO,
        key_converter_schemas_enable=False,
        value_converter_schemas_enable=True,
        value_converter_schema_registry_url="http://registry:8080/apis/ccompat/v7",
        dropped_changes_topic="orders.dropped",
        schema_name_adjustment_mode=NameAdjustment.AVRO_UNICODE,
        field_name_adjustment_mode=NameAdjustment.NONE,
    )
    assert build_config(BASE).envelope_settings().field_name_adjustment_mode is NameAdjustment.AVRO


def test_derived_settings() -> None:
    config = build_config(with_(**{"scylla.confidence.window.size": "2000", "value.converter":
                                   "org.apache.kafka.connect.json.JsonConverter"}))
    assert config.tables() == [("ks", "t1"), ("ks", "t2")]
    assert config.scylla_contact_points() == [("10.0.0.1", 9042), ("10.0.0.2", 19042)]
    assert config.offsets_topic == "c1-offsets" and config.slots_topic_name == "c1-slots"
    assert config.reader_settings().confidence_window_size_ms == 2000
    assert config.envelope_settings().topic_prefix == "p"
    assert config.kafka_client_config() == {"bootstrap.servers": "k:9092"}


def test_file_then_environment_then_set(tmp_path: Path) -> None:
    properties = tmp_path / "w.properties"
    properties.write_text("\n".join(f"{k}={v}" for k, v in BASE.items()) + "\nslots.count=8\n")
    yaml_file = tmp_path / "w.yaml"
    yaml_file.write_text("name: c1\ntopic:\n  prefix: p\nscylla:\n  cluster.ip.addresses: 10.0.0.1:9042,"
                         "10.0.0.2:19042\n  table.names: ks.t1, ks.t2\nkafka:\n  bootstrap.servers: k:9092\n"
                         "slots.count: 8\n")
    assert load_config(properties, environ={}) == load_config(yaml_file, environ={})
    env = {"CDC_BRIDGE_SLOTS_COUNT": "16", "CDC_BRIDGE_KAFKA_SASL_MECHANISM": "PLAIN"}
    config = load_config(properties, environ=env, overrides=parse_sets(["slots.count=32"]))
    assert config.slots_count == 32
    assert config.kafka_client_config()["sasl.mechanism"] == "PLAIN"
    assert load_config(properties, environ=env).slots_count == 16


def test_secrets_never_shown(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text("file-secret-9\n")
    config = build_config(with_(**{"scylla.user": "u", "scylla.password": "cql-secret-7",
                                   "kafka.sasl.password": "kafka-secret-8",
                                   "kafka.sasl.password.file": str(secret_file)}))
    shown = str(config) + repr(config) + "\n".join(" ".join(row) for row in config.describe())
    for secret in ("cql-secret-7", "kafka-secret-8", "file-secret-9"):
        assert secret not in shown
    assert config.scylla_password_value() == "cql-secret-7"
    assert config.kafka_client_config()["sasl.password"] == "file-secret-9"
    with pytest.raises(ConfigError) as error:
        build_config(with_(**{"scylla.password": "cql-secret-7", "slots.count": "x"}))
    assert "cql-secret-7" not in str(error.value)


def test_reference_lists_every_setting() -> None:
    reference = render_reference()
    for key in ("name", "topic.prefix", "scylla.table.names", "offset.storage.topic", "metrics.port", "kafka.*"):
        assert f"| `{key}` |" in reference


def test_snapshot_and_channel_settings_take_debeziums_names() -> None:
    config = build_config(with_(**{"snapshot.mode": "never", "signal.enabled.channels": "kafka",
                                   "notification.enabled.channels": "sink"}))
    assert config.snapshot_mode == "no_data"
    assert config.signals_topic == f"{config.name}-signals"
    assert config.notifications_topic == f"{config.name}-notifications"
    assert build_config(BASE).signals_topic is None and build_config(BASE).notifications_topic is None
