"""No secret value reaches `cdc-bridge config describe` or `config check`: each secret setting is
set to its own marker and every line printed is searched for every marker (on ffd4452 the JAAS
config, the OAuth bearer config and a registry URL's password were printed in clear)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MARKERS = {
    "scylla.password": "M1-scylla-password",
    "scylla.ssl.truststore.password": "M2-truststore",
    "scylla.ssl.keystore.password": "M3-keystore",
    "kafka.sasl.password": "M4-sasl-password",
    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                              'password="M5-jaas-password";',
    "kafka.sasl.oauthbearer.config": "clientId=c clientSecret=M6-oauth-secret scope=s",
    "kafka.sasl.oauthbearer.client.secret": "M7-oauth-client-secret",
    "kafka.ssl.key.password": "M8-key-password",
    "value.converter.schema.registry.url": "http://reg:M9-registry-password@registry:8081",
    "key.converter.schema.registry.url": "https://reg:M10-registry-password@registry:8081/apis/ccompat/v7",
    "value.converter.basic.auth.user.info": "reg:M11-registry-user-info",
}


def _settings(path: Path) -> Path:
    lines = ["name=secrets", "topic.prefix=p", "scylla.cluster.ip.addresses=127.0.0.1:9042",
             "scylla.table.names=ks.t", "scylla.user=reader", "kafka.bootstrap.servers=127.0.0.1:9092",
             *(f"{key}={value}" for key, value in MARKERS.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _printed(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "bridge.cli", *args], capture_output=True, text=True,
                            timeout=60, check=False)
    return result.stdout + result.stderr


def test_config_describe_and_check_print_no_secret(tmp_path: Path) -> None:
    config = _settings(tmp_path / "w.properties")
    described = _printed("config", "describe", "--config", str(config))
    assert "kafka.sasl.jaas.config = **********" in described  # the setting is listed, its value masked
    assert "value.converter.schema.registry.url = http://reg:**********@registry:8081" in described
    checked = _printed("config", "check", "--config", str(config))
    for text in (described, checked):
        leaked = [key for key, value in MARKERS.items() if re.search(r"M\d+-[\w-]+", value)[0] in text]
        assert leaked == [], f"printed in clear: {leaked}"
