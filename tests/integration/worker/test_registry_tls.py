"""A schema registry served over HTTPS only (Apicurio with its TLS listener and a certificate of
a private CA): the worker registers and writes through it when given the CA
(`*.converter.schema.registry.ssl.truststore.location`), and without it refuses to start in one
line naming the registry setting. On ffd4452 the registry client had no TLS settings."""

from __future__ import annotations

import ssl
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.certs import issue, new_ca, write_private
from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.process import spawn, terminate
from bridge_devstack.stack.services import Apicurio
from tests.integration.worker.harness import CLI, WorkerProcess, free_port, read_topic, wait_for

pytestmark = pytest.mark.slow


def _answers(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as answer:  # noqa: S310 (https only)
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture
def tls_registry(tmp_path: Path, stack: Endpoints) -> Iterator[tuple[str, Path]]:
    """(the HTTPS registry URL, the PEM CA bundle its certificate chains to)."""
    ca = new_ca("registry TLS test CA")
    server = issue(ca, "127.0.0.1", server=True, client=False)
    cert = tmp_path / "registry.pem"
    cert.write_bytes(server.cert_pem())
    key = write_private(tmp_path / "registry.key", server.key_pem())
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(ca.cert_pem())
    port = free_port()
    service = Apicurio(StackLayout.default(), replace(stack, registry_port=free_port()))
    command = service.command()
    command[command.index("-jar"):command.index("-jar")] = [
        f"-Dquarkus.http.ssl-port={port}", f"-Dquarkus.http.ssl.certificate.files={cert}",
        f"-Dquarkus.http.ssl.certificate.key-files={key}", "-Dquarkus.http.insecure-requests=disabled"]
    pid = spawn(command, tmp_path, tmp_path / "apicurio-tls.log")
    url = f"https://127.0.0.1:{port}/apis/ccompat/v7"
    try:
        wait_for(lambda: _answers(f"{url}/subjects", ssl.create_default_context(cafile=bundle)), 120,
                 "the HTTPS registry to answer")
        yield url, bundle
    finally:
        terminate(pid, "apicurio-registry-app", grace_s=10)


def test_avro_through_an_https_registry_with_its_ca_and_a_clear_refusal_without_it(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str, tls_registry: tuple[str, Path],
) -> None:
    url, bundle = tls_registry
    table = f"{keyspace}.orders"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")
    avro = {"key__converter": "avro", "value__converter": "avro", "key__converter__schema__registry__url": url,
            "value__converter__schema__registry__url": url}
    refused = subprocess.run([*CLI, "run", "--config", str(config_for([table], **avro))], capture_output=True,
                             text=True, timeout=120, check=False)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("error: key.converter.schema.registry.url: "), refused.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr or "certificate verify failed" in refused.stderr

    config = config_for([table], **avro, key__converter__schema__registry__ssl__truststore__location=bundle,
                        value__converter__schema__registry__ssl__truststore__location=bundle)
    workers(config, "tls")
    for i in range(5):
        emulator.execute(f"INSERT INTO {table} (id, item) VALUES ({i}, 'x')")
    assert len(read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=5)) == 5
    with urllib.request.urlopen(f"{url}/subjects", timeout=10,  # noqa: S310 (https only)
                                context=ssl.create_default_context(cafile=bundle)) as answer:
        assert f"{bridge_name}.{table}-value".encode() in answer.read()
