"""Kafka Connect's `kafka.sasl.jaas.config` becomes librdkafka's SASL settings (on ffd4452
librdkafka refused it with a traceback); a login module without a mapping is one line naming the
setting, with no secret in it."""

from __future__ import annotations

import pytest

from bridge.settings import ConfigError
from bridge.settings.jaas import librdkafka_settings
from bridge.settings.load import build_config
from tests.unit.test_config import with_

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3 \\"q\\"";'
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password=pw;"
OAUTH = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c1" '
         'clientSecret="shh" scope="kafka";')


def test_plain_scram_and_oauth_client_credentials_map_to_librdkafka() -> None:
    assert librdkafka_settings(PLAIN) == {"sasl.username": "alice", "sasl.password": 's3 "q"',
                                          "sasl.mechanism": "PLAIN"}
    assert librdkafka_settings(SCRAM) == {"sasl.username": "bob", "sasl.password": "pw"}
    assert librdkafka_settings(OAUTH) == {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                                          "sasl.oauthbearer.client.id": "c1",
                                          "sasl.oauthbearer.client.secret": "shh", "sasl.oauthbearer.scope": "kafka"}


def test_the_worker_gets_the_translation_and_explicit_settings_win() -> None:
    config = build_config(with_(kafka__sasl__jaas__config=SCRAM, kafka__sasl__mechanism="SCRAM-SHA-512"))
    client = config.kafka_client_config()
    assert "sasl.jaas.config" not in client
    assert (client["sasl.username"], client["sasl.password"], client["sasl.mechanism"]) == ("bob", "pw",
                                                                                           "SCRAM-SHA-512")


@pytest.mark.parametrize("jaas", [
    'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="p@R";',
    'org.apache.kafka.common.security.plain.PlainLoginModule required password="secret-marker";',
    "username=x password=secret-marker",
])
def test_other_modules_and_broken_lines_are_one_line_without_the_secret(jaas: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config(with_(kafka__sasl__jaas__config=jaas))
    assert raised.value.key == "kafka.sasl.jaas.config"
    assert "secret-marker" not in str(raised.value) and "\n" not in str(raised.value)
