"""Security settings: credentials as the Java connector pairs them, secrets from files, the
`scylla.ssl.*` keys through the model, and the refusal messages of both clusters."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from bridge.kafka.access import KafkaAccessError, _bad_setting, _is_refusal, _refused
from bridge.scylla.session import _access_error
from bridge.settings import ConfigError, load_config
from bridge.settings.load import build_config
from bridge_devstack.stack.certs import new_ca
from tests.unit.test_config import with_


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scylla.user": "u"}, "scylla.password: required when scylla.user is set"),
        ({"scylla.password": "pw-123"}, "scylla.user: required when scylla.password"),
        ({"scylla.user": "u", "scylla.password": "pw-123", "scylla.password.file": "/x"},
         "scylla.password.file: set either scylla.password or scylla.password.file"),
        ({"scylla.ssl.provider": "BORINGSSL"}, "scylla.ssl.provider: must be one of JDK, OPENSSL"),
        ({"scylla.ssl.enabled": "maybe"}, "scylla.ssl.enabled: input should be a valid boolean"),
    ],
)
def test_bad_security_settings_name_the_key(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_config(with_(**changes))
    assert str(error.value).startswith(message)
    assert "pw-123" not in str(error.value)


def test_kafka_secret_files_are_read_and_their_paths_shown(tmp_path: Path) -> None:
    (tmp_path / "sasl").write_text("sasl-secret-1\n")
    (tmp_path / "key").write_text("key-secret-2")
    config = build_config(with_(**{"kafka.sasl.password.file": str(tmp_path / "sasl"),
                                   "kafka.ssl.key.password.file": str(tmp_path / "key"),
                                   "kafka.ssl.ca.location": "/ca.pem"}))
    client = config.kafka_client_config()
    assert client["sasl.password"] == "sasl-secret-1" and client["ssl.key.password"] == "key-secret-2"
    assert not any(key.endswith(".file") for key in client)
    shown = {key: value for key, value, _, _ in config.describe()}
    assert shown["kafka.sasl.password.file"] == str(tmp_path / "sasl")  # a path, not a secret
    missing = build_config(with_(**{"kafka.sasl.password.file": str(tmp_path / "nope")}))
    with pytest.raises(ConfigError, match=r"^kafka.sasl.password.file: cannot read"):
        missing.kafka_client_config()


def test_passwords_from_the_environment_are_masked_in_describe() -> None:
    env = {"CDC_BRIDGE_SCYLLA_PASSWORD": "env-secret-3", "CDC_BRIDGE_KAFKA_SASL_PASSWORD": "env-secret-4",
           "CDC_BRIDGE_SCYLLA_SSL_TRUSTSTORE_PASSWORD": "env-secret-5"}
    config = load_config(None, overrides=with_(**{"scylla.user": "u"}), environ=env)
    assert config.kafka_client_config()["sasl.password"] == "env-secret-4"
    assert config.scylla_password_value() == "env-secret-3"
    shown = "\n".join(" ".join(row) for row in config.describe())
    assert not any(secret in shown for secret in env.values())


def test_ssl_settings_build_the_driver_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(new_ca("settings CA").cert_pem())
    config = build_config(with_(**{"scylla.ssl.enabled": "true", "scylla.ssl.truststore.path": str(ca),
                                   "scylla.ssl.hostname.validation": "false", "scylla.ssl.provider": "openssl"}))
    context = config.scylla_ssl_context()
    assert context is not None and not context.check_hostname
    assert config.ssl_provider == "OPENSSL"
    assert build_config(with_()).scylla_ssl_context() is None
    broken = build_config(with_(**{"scylla.ssl.enabled": "true", "scylla.ssl.truststore.path": str(tmp_path)}))
    with pytest.raises(ConfigError, match=r"^scylla.ssl.truststore.path: cannot read"):
        broken.scylla_ssl_context()


# ---------------------------------------------------------------- refusals, as the clients word them


def test_kafka_refusals_name_the_setting_and_the_cluster() -> None:
    config = {"bootstrap.servers": "b:9093", "sasl.username": "bridge", "sasl.mechanism": "SCRAM-SHA-512"}
    auth = KafkaError(KafkaError._AUTHENTICATION, "sasl_ssl://b:9093/bootstrap: SASL authentication error: "
                      "Authentication failed due to invalid credentials (after 362ms in state AUTH_REQ)")
    error = _refused("b:9093", config, auth)
    assert error.key == "kafka.sasl.password"
    assert error.reason == ("Kafka b:9093 refused the credentials of user 'bridge' (SCRAM-SHA-512): SASL "
                            "authentication error: Authentication failed due to invalid credentials")
    untrusted = KafkaError(KafkaError._SSL, "ssl://b:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
                           "routines::certificate verify failed: broker certificate could not be verified")
    assert _refused("b:9093", config, untrusted).key == "kafka.ssl.ca.location"
    alert = KafkaError(KafkaError._TRANSPORT, "ssl://b:9094/bootstrap: Receive failed: error:0A000412:SSL "
                       "routines::ssl/tls alert bad certificate: SSL alert number 42")
    assert _is_refusal(alert) and _refused("b:9094", config, alert).key == "kafka.ssl.certificate.location"
    assert not _is_refusal(KafkaError(KafkaError._TRANSPORT, "Connection refused"))


@pytest.mark.parametrize(
    ("message", "key"),
    [
        ('No such configuration property: "ssl.truststore.type"', "kafka.ssl.truststore.type"),
        ('Invalid value "BOGUS" for configuration property "security.protocol"', "kafka.security.protocol"),
        ("Failed to create admin client: sasl.username and sasl.password must be set", "kafka.sasl.username"),
        ("Java TrustStores are not supported, use `ssl.ca.location` and a certificate file instead.",
         "kafka.ssl.truststore.location"),
    ],
)
def test_unusable_kafka_properties_name_the_setting(message: str, key: str) -> None:
    config = {"bootstrap.servers": "b:1", "sasl.username": "u", "ssl.truststore.location": "/t.jks"}
    error = _bad_setting(message, config)
    assert isinstance(error, KafkaAccessError) and error.key == key


def test_cql_refusals_name_the_setting_and_the_cluster() -> None:
    bad = ('Failed to authenticate to 10.0.0.1:9042: Error from server: code=0100 [Bad credentials] '
           'message="Provided username bridge and/or password are incorrect"')
    error = _access_error("10.0.0.1:9042", "bridge", True, [bad])
    assert error is not None and error.key == "scylla.password"
    assert error.reason == ("CQL cluster 10.0.0.1:9042 refused the credentials of user 'bridge' (Bad credentials: "
                            "Provided username bridge and/or password are incorrect)")
    untrusted = ("[Errno 1] Tried connecting to [('10.0.0.1', 9042)]. Last error: [SSL: CERTIFICATE_VERIFY_FAILED] "
                 "certificate verify failed: self-signed certificate in certificate chain (_ssl.c:1006)")
    error = _access_error("10.0.0.1:9042", None, True, [untrusted])
    assert error is not None and error.key == "scylla.ssl.truststore.path"
    assert error.reason.endswith("is not trusted (self-signed certificate in certificate chain)")
    mismatch = ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch, certificate is "
                "not valid for '10.0.0.1'. (_ssl.c:1006)")
    error = _access_error("10.0.0.1:9042", None, True, [mismatch])
    assert error is not None and error.key == "scylla.ssl.hostname.validation"
    no_cert = "EOF occurred in violation of protocol (_ssl.c:2427)"
    error = _access_error("10.0.0.1:9042", None, True, [no_cert])
    assert error is not None and error.key == "scylla.ssl.keystore.path"
    assert _access_error("10.0.0.1:9042", None, True, ["[Errno 111] Connection refused"]) is None
