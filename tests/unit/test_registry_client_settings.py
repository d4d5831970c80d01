"""The schema registry client's credentials and CA, from Confluent's converter settings: what
reaches confluent-kafka's client, and what is refused in one line naming the setting (on ffd4452
the registry client had no auth or TLS settings at all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.kafka.registry import registry_client
from bridge.settings import ConfigError
from bridge.settings.load import build_config
from bridge_devstack.stack.certs import new_ca
from tests.unit.test_config import with_

pytestmark = pytest.mark.unit
URL = "https://registry.example:8081"
AVRO = {"key.converter": "avro", "value.converter": "avro", "key.converter.schema.registry.url": URL,
        "value.converter.schema.registry.url": URL}


def _client(props: dict[str, str]) -> object:
    config = build_config(props)
    return registry_client(URL, **config.registry_client_config(URL)).client._rest_client


def test_user_info_credentials_reach_the_client() -> None:
    rest = _client({**with_(), **AVRO, "key.converter.basic.auth.credentials.source": "user_info",
                    "key.converter.basic.auth.user.info": "reader:s3cret:with-colon"})
    assert rest.auth == ("reader", "s3cret:with-colon")


def test_the_ca_bundle_is_the_one_the_client_trusts(tmp_path: Path) -> None:
    ca = new_ca("registry test CA")
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(ca.cert_pem())
    rest = _client({**with_(), **AVRO, "key.converter.schema.registry.ssl.truststore.location": str(bundle)})
    trusted = [dict(pair[0] for pair in cert["subject"])["commonName"] for cert in rest.verify.get_ca_certs()]
    assert trusted == ["registry test CA"]  # that CA alone, not the system's


def _refused(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as raised:
        build_config({**with_(), **AVRO, **props})
    return str(raised.value)


def test_bad_registry_settings_are_refused_naming_the_setting(tmp_path: Path) -> None:
    assert _refused({"value.converter.basic.auth.credentials.source": "USER_INFO"}).startswith(
        "value.converter.basic.auth.credentials.source: is USER_INFO, but value.converter.basic.auth.user.info")
    assert _refused({"key.converter.basic.auth.credentials.source": "SASL_INHERIT"}).startswith(
        "key.converter.basic.auth.credentials.source: must be URL or USER_INFO")
    assert _refused({"key.converter.basic.auth.user.info": "no-colon"}).startswith(
        "key.converter.basic.auth.user.info: must be user:password")
    assert _refused({"key.converter.schema.registry.url": "https://u:p@registry:8081",
                     "key.converter.basic.auth.credentials.source": "USER_INFO",
                     "key.converter.basic.auth.user.info": "u:p"}).startswith(
        "key.converter.basic.auth.credentials.source: is USER_INFO, but key.converter.schema.registry.url has")
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    assert _refused({"key.converter.schema.registry.ssl.truststore.location": str(jks)}).startswith(
        f"key.converter.schema.registry.ssl.truststore.location: {jks} is not a PEM CA bundle")
