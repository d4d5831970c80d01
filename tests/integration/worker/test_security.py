"""Security against real servers: a private secured stack (`StackManager(secure=True)`: Kafka with
SASL_SSL SCRAM-SHA-512 and PLAIN users and a client-certificate TLS listener, Cassandra with
PasswordAuthenticator and TLS that requires a client certificate) on ports shifted from the
stack's offset, so the shared stack is never touched.

Real `cdc-bridge run` workers carry emulated CDC changes through each Kafka security mode, with
passwords from the config, the environment and files; refused passwords and untrusted certificates
end start-up at once with one line; no secret shows in any log line, error, metric or
`config describe` output."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.certs import new_ca
from bridge_devstack.stack.layout import Endpoints, StackLayout, port_offset
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.secure import KAFKA_PLAIN_USER, KAFKA_SCRAM_USER, SecureMaterial
from tests.integration.worker.harness import (
    CLI,
    WorkerProcess,
    free_port,
    http_get,
    ids_of,
    read_topic,
    worker_properties,
    write_properties,
)

pytestmark = pytest.mark.slow
# Every port below Linux's ephemeral range (32768-60999), where a client's outgoing connection
# could hold one when Kafka binds it: 24000 put Kafka on 33092-33094 and Cassandra on 33042.
# 17000: Cassandra 26042 and 24000, Kafka 26092-26094, clear of the other tests' private ports.
PRIVATE_OFFSET = port_offset(17000)
ROWS = 20
# Bound on a refused start-up: far below the 15 s the worker would wait for Kafka to answer.
FAIL_FAST_S = 12.0


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackManager]:
    layout = StackLayout(deploy_dir=StackLayout.default().deploy_dir,
                         state_dir=tmp_path_factory.mktemp("secured") / "stack")
    manager = StackManager(layout, Endpoints().shifted(PRIVATE_OFFSET), say=lambda _: None, secure=True)
    try:
        manager.up(quiet=True, only=["kafka", "cassandra"])
        yield manager
    finally:
        manager.down(only=["kafka", "cassandra"])


@pytest.fixture(scope="module")
def material(secure_stack: StackManager) -> SecureMaterial:
    assert secure_stack.secure is not None
    return secure_stack.secure


@pytest.fixture(scope="module")
def secure_emulator(secure_stack: StackManager, material: SecureMaterial) -> Iterator[Emulator]:
    cluster = material.cassandra_cluster(secure_stack.endpoints)
    try:
        emulator = Emulator(cluster.connect())
        emulator.execute("CREATE KEYSPACE IF NOT EXISTS secured WITH replication = "
                         "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        yield emulator
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def secrets(material: SecureMaterial) -> list[str]:
    """Every secret value of the secured stack; tests add their own."""
    found = [material.password(name) for name in ("kafka-scram", "kafka-plain", "cassandra",
                                                  "cassandra-admin", "keystore")]
    key_body = material.client_key.read_text().splitlines()[1]  # a line of the private key's base64
    return [*found, key_body]


def assert_no_secret(text: str, secrets: list[str], where: str) -> None:
    leaked = [secret for secret in secrets if secret in text]
    assert not leaked, f"{len(leaked)} secret value(s) appear in {where}"


def make_table(emulator: Emulator, name: str) -> str:
    emulator.execute(f"CREATE TABLE secured.{name} (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
    for i in range(ROWS):
        emulator.execute(f"INSERT INTO secured.{name} (id, item) VALUES ({i}, 'apple')")
    return f"secured.{name}"


def base_properties(endpoints: Endpoints, material: SecureMaterial, name: str, table: str) -> dict[str, str]:
    """SASL_SSL/SCRAM to Kafka, password (from the environment) and mutual TLS to Cassandra."""
    props = worker_properties(endpoints, name, [table])
    settings = material.worker_settings(endpoints)
    del settings["scylla.password.file"]  # given by CDC_BRIDGE_SCYLLA_PASSWORD instead
    props.update(settings)
    return props


def java_truststore(material: SecureMaterial, folder: Path, password: str) -> Path:
    """A PKCS#12 truststore as Java's keytool writes it (what Java connector users already have)."""
    store = folder / "truststore.p12"
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(material.ca_pem),
                    "-keystore", str(store), "-storetype", "PKCS12", "-storepass", password],
                   check=True, capture_output=True, timeout=60)
    return store


def client_keystore(material: SecureMaterial, folder: Path, password: str) -> Path:
    from cryptography import x509

    key = serialization.load_pem_private_key(material.client_key.read_bytes(), None)
    chain = x509.load_pem_x509_certificates(material.client_cert.read_bytes())
    data = pkcs12.serialize_key_and_certificates(b"client", key, chain[0], chain[1:],  # type: ignore[arg-type]
                                                 serialization.BestAvailableEncryption(password.encode()))
    store = folder / "client.p12"
    store.write_bytes(data)
    return store


@pytest.mark.parametrize("mode", ["scram", "plain", "tls", "jaas"])
def test_worker_carries_changes_through_each_kafka_security_mode(
    mode: str, secure_stack: StackManager, material: SecureMaterial, secure_emulator: Emulator,
    secrets: list[str], tmp_path: Path, workers: Callable[..., WorkerProcess], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scram: Kafka password from a file, CQL password from the environment, PEM CA and client
    certificate. plain: Kafka password from the environment, CQL password from a file, a keytool
    PKCS#12 truststore and a PKCS#12 client keystore (passwords in the config). tls: Kafka client
    certificate, CQL password in the config file. jaas: Kafka Connect's form,
    `kafka.sasl.jaas.config` with the SCRAM login module (librdkafka has no such setting)."""
    endpoints = secure_stack.endpoints
    table = make_table(secure_emulator, f"orders_{mode}")
    name = f"sec-{mode}"
    props = base_properties(endpoints, material, name, table)
    port = free_port()
    props["metrics.port"] = str(port)
    cql_password = material.password("cassandra")
    store_password = f"store-{os.urandom(6).hex()}"
    if mode == "scram":
        monkeypatch.setenv("CDC_BRIDGE_SCYLLA_PASSWORD", cql_password)
    elif mode == "plain":
        del props["kafka.sasl.password.file"]
        props.update({"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": KAFKA_PLAIN_USER,
                      "scylla.password.file": str(material.password_file("cassandra")),
                      "scylla.ssl.truststore.path": str(java_truststore(material, tmp_path, store_password)),
                      "scylla.ssl.truststore.password": store_password,
                      "scylla.ssl.keystore.path": str(client_keystore(material, tmp_path, store_password)),
                      "scylla.ssl.keystore.password": store_password})
        del props["scylla.ssl.openssl.keyCertChain"], props["scylla.ssl.openssl.privateKey"]
        monkeypatch.setenv("CDC_BRIDGE_KAFKA_SASL_PASSWORD", material.password("kafka-plain"))
    elif mode == "jaas":
        del props["kafka.sasl.username"], props["kafka.sasl.password.file"]
        scram_password = material.password("kafka-scram")
        props["kafka.sasl.jaas.config"] = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                           f'username="{KAFKA_SCRAM_USER}" password="{scram_password}";')
        props["scylla.password"] = cql_password
    else:
        for key in ("kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.password.file"):
            del props[key]
        props.update({"kafka.bootstrap.servers": f"{endpoints.host}:{endpoints.kafka_tls_port}",
                      "kafka.security.protocol": "SSL",
                      "kafka.ssl.certificate.location": str(material.client_cert),
                      "kafka.ssl.key.location": str(material.client_key),
                      "scylla.password": cql_password})
    config = write_properties(tmp_path / f"{name}.properties", props)
    all_secrets = [*secrets, store_password]

    worker = workers(config, name)
    messages = read_topic(endpoints.kafka_bootstrap, f"{name}.{table}", expected=ROWS, timeout_s=120,
                          client=material.kafka_client(endpoints, "scram"))
    assert sorted(ids_of(messages)) == list(range(ROWS)), "every change once, through the secured paths"
    status, metrics = http_get(port, "/metrics")
    assert status == 200 and "cdc_bridge_records_produced_total" in metrics
    assert_no_secret(metrics, all_secrets, "/metrics")
    assert worker.stop() == 0
    assert_no_secret(worker.log_path.read_text(errors="replace"), all_secrets, "the worker's log")

    describe = subprocess.run([*CLI, "config", "describe", "--config", str(config)], capture_output=True,
                              text=True, timeout=60, check=False)
    assert describe.returncode == 0, describe.stderr
    assert_no_secret(describe.stdout + describe.stderr, all_secrets, "config describe")
    if mode != "plain":
        assert "scylla.password = **********" in describe.stdout


def _other_ca(folder: Path) -> Path:
    path = folder / "other-ca.pem"
    path.write_bytes(new_ca("some other CA").cert_pem())
    return path


@pytest.mark.parametrize("case", ["kafka-password", "kafka-untrusted", "cql-password", "cql-untrusted"])
def test_a_refusal_stops_start_up_at_once_with_one_line(
    case: str, secure_stack: StackManager, material: SecureMaterial, secrets: list[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoints = secure_stack.endpoints
    props = base_properties(endpoints, material, f"refused-{case}", "secured.orders_scram")
    wrong = f"wrong-{os.urandom(6).hex()}"
    cql_password = wrong if case == "cql-password" else material.password("cassandra")
    monkeypatch.setenv("CDC_BRIDGE_SCYLLA_PASSWORD", cql_password)
    kafka = endpoints.kafka_bootstrap
    cql = f"{endpoints.cassandra_host}:{endpoints.cassandra_port}"
    if case == "kafka-password":
        (tmp_path / "kafka.password").write_text(wrong)
        props["kafka.sasl.password.file"] = str(tmp_path / "kafka.password")
        key, cluster, problem = "kafka.sasl.password", kafka, "refused the credentials of user 'bridge'"
    elif case == "kafka-untrusted":
        props["kafka.ssl.ca.location"] = str(_other_ca(tmp_path))
        key, cluster, problem = "kafka.ssl.ca.location", kafka, "is not trusted"
    elif case == "cql-password":
        key, cluster, problem = "scylla.password", cql, "refused the credentials of user 'bridge'"
    else:
        props["scylla.ssl.truststore.path"] = str(_other_ca(tmp_path))
        key, cluster, problem = "scylla.ssl.truststore.path", cql, "is not trusted"
    config = write_properties(tmp_path / "refused.properties", props)

    began = time.monotonic()
    result = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=120,
                            check=False)
    elapsed = time.monotonic() - began
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, f"expected one line on stderr, got: {lines}"
    assert lines[0].startswith(f"error: {key}: "), lines[0]
    assert cluster in lines[0] and problem in lines[0], lines[0]
    assert elapsed < FAIL_FAST_S, f"start-up took {elapsed:.1f} s to give up: a retry loop?"
    assert_no_secret(result.stdout + result.stderr, [*secrets, wrong], "the refused worker's output")
