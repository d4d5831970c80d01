"""The secured stack's material: a CA-signed set of certificates that TLS stacks accept, secrets
readable by their owner only, and a state folder that keeps the mode it was set up with."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import StackError
from bridge_devstack.stack.secure import SecureMaterial


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> SecureMaterial:
    return SecureMaterial.ensure(tmp_path_factory.mktemp("state") / "secure", Endpoints().shifted(100))


def test_certificates_chain_to_the_ca_and_name_loopback(material: SecureMaterial) -> None:
    ca = x509.load_pem_x509_certificate(material.ca_pem.read_bytes())
    node = x509.load_pem_x509_certificates(material.cassandra_keystore.read_bytes())[0]
    client = x509.load_pem_x509_certificates(material.client_cert.read_bytes())[0]
    for leaf in (node, client):
        leaf.verify_directly_issued_by(ca)
    names = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # OpenSSL accepts the client pair and the CA as a trust anchor.
    context = material.cassandra_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_secrets_are_private_and_reused(material: SecureMaterial) -> None:
    for path in (material.client_key, material.kafka_keystore, material.cassandra_keystore,
                 material.password_file("kafka-scram"), material.password_file("cassandra")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    before = material.password("kafka-scram")
    again = SecureMaterial.ensure(material.folder, Endpoints().shifted(100))
    assert again.password("kafka-scram") == before, "set-up must not replace what clients copied"


def test_broker_and_worker_settings(material: SecureMaterial) -> None:
    endpoints = Endpoints().shifted(100)
    broker = material.kafka_properties(endpoints)
    assert "listeners=SASL_SSL://127.0.0.1:9192,SSL://127.0.0.1:9194,CONTROLLER://127.0.0.1:9193" in broker
    assert "listener.name.ssl.ssl.client.auth=required" in broker
    assert "inter.broker.listener.name=SSL" in broker
    worker = material.worker_properties_path.read_text()
    assert "kafka.sasl.password.file=" in worker and "scylla.password.file=" in worker
    assert material.password("kafka-scram") not in worker and material.password("cassandra") not in worker


def test_a_plain_state_folder_does_not_turn_secure(tmp_path: Path) -> None:
    layout = StackLayout(StackLayout.default().deploy_dir, tmp_path)
    (layout.home("kafka") / "data").mkdir(parents=True)
    with pytest.raises(StackError, match="set up without --secure"):
        StackManager(layout, Endpoints(), say=lambda _: None, secure=True)
    assert StackManager(layout, Endpoints(), say=lambda _: None).secure is None


def test_a_secured_folder_stays_secured(tmp_path: Path) -> None:
    layout = StackLayout(StackLayout.default().deploy_dir, tmp_path)
    assert StackManager(layout, Endpoints(), say=lambda _: None, secure=True).secure is not None
    assert StackManager(layout, Endpoints(), say=lambda _: None).secure is not None  # `status`, `down`
    with pytest.raises(StackError, match="was set up with --secure"):
        StackManager(layout, Endpoints(), say=lambda _: None, secure=False)
