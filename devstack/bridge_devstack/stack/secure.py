"""The secured variant of the local stack (`cdc-bridge stack up --secure`): what it needs on disk
(a CA, server and client certificates, random passwords) and how Kafka and Cassandra are
configured and probed with it.

Kafka listens with SASL_SSL on its usual port (SCRAM-SHA-512 and PLAIN users) and with TLS plus a
required client certificate on `kafka_tls_port` (also the inter-broker listener); only the KRaft
controller listener stays plaintext on loopback. Cassandra takes TLS only (client certificate
required) and `PasswordAuthenticator`; its default superuser gets a random password on first
start. Everything lives in `<state>/secure/`, files holding secrets readable by the owner only;
`worker-security.properties` there holds the settings a worker needs (passwords by file).
"""

from __future__ import annotations

import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding

from bridge_devstack.stack.certs import issue, new_ca, write_private
from bridge_devstack.stack.layout import Endpoints

KAFKA_SCRAM_USER = "bridge"
KAFKA_PLAIN_USER = "bridge_plain"  # JAAS option names (user_<name>) take no dashes
CASSANDRA_USER = "bridge"
_DEFAULT_SUPERUSER = ("cassandra", "cassandra")
_PASSWORDS = ("kafka-scram", "kafka-plain", "cassandra", "cassandra-admin", "keystore")


def _password() -> str:
    # URL-safe base64 has no ',' '=' or quotes: safe inside --add-scram and JAAS values.
    return secrets.token_urlsafe(18)


@dataclass(frozen=True, slots=True)
class SecureMaterial:
    folder: Path

    # ------------------------------------------------------------------ files

    @property
    def ca_pem(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def kafka_keystore(self) -> Path:
        return self.folder / "kafka-broker.p12"

    @property
    def cassandra_keystore(self) -> Path:
        """Cassandra's PEM keystore: its private key followed by its certificate chain."""
        return self.folder / "cassandra-node.pem"

    @property
    def client_cert(self) -> Path:
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.folder / "client.key"

    @property
    def worker_properties_path(self) -> Path:
        return self.folder / "worker-security.properties"

    def password_file(self, name: str) -> Path:
        return self.folder / f"{name}.password"

    def password(self, name: str) -> str:
        return self.password_file(name).read_text().strip()

    # ------------------------------------------------------------------ set-up

    @classmethod
    def exists_in(cls, folder: Path) -> bool:
        return (folder / "ca.pem").exists()

    @classmethod
    def ensure(cls, folder: Path, endpoints: Endpoints) -> SecureMaterial:
        """Create the CA, certificates and passwords once; later calls reuse them (clients may have
        copied the CA)."""
        material = cls(folder)
        if not cls.exists_in(folder):
            material._create()
        material._write_worker_properties(endpoints)
        return material

    def _create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in _PASSWORDS:
            write_private(self.password_file(name), _password().encode())
        ca = new_ca()
        broker = issue(ca, "kafka-broker", server=True, client=True)  # inter-broker TLS is mTLS too
        node = issue(ca, "cassandra-node", server=True, client=False)
        client = issue(ca, "cdc-bridge-client", server=False, client=True)
        write_private(self.kafka_keystore, broker.pkcs12(self.password("keystore"), "kafka-broker"))
        write_private(self.cassandra_keystore, node.key_pem() + node.cert_pem())
        write_private(self.client_key, client.key_pem())
        self.client_cert.write_bytes(client.cert_pem())
        self.ca_pem.write_bytes(ca.chain[0].public_bytes(Encoding.PEM))  # written last: marks the set complete

    def _write_worker_properties(self, endpoints: Endpoints) -> None:
        lines = [f"{key}={value}" for key, value in self.worker_settings(endpoints).items()]
        self.worker_properties_path.write_text(
            "# Security settings for `cdc-bridge run` against this secured local stack.\n"
            + "\n".join(lines) + "\n")

    # ------------------------------------------------------------------ clients

    def worker_settings(self, endpoints: Endpoints) -> dict[str, str]:
        """Bridge settings for SASL_SSL/SCRAM to Kafka and password + mutual TLS to Cassandra."""
        return {
            "kafka.bootstrap.servers": endpoints.kafka_bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": KAFKA_SCRAM_USER,
            "kafka.sasl.password.file": str(self.password_file("kafka-scram")),
            "kafka.ssl.ca.location": str(self.ca_pem),
            "scylla.cluster.ip.addresses": f"{endpoints.cassandra_host}:{endpoints.cassandra_port}",
            "scylla.user": CASSANDRA_USER,
            "scylla.password.file": str(self.password_file("cassandra")),
            "scylla.ssl.enabled": "true",
            "scylla.ssl.truststore.path": str(self.ca_pem),
            "scylla.ssl.openssl.keyCertChain": str(self.client_cert),
            "scylla.ssl.openssl.privateKey": str(self.client_key),
        }

    def kafka_client(self, endpoints: Endpoints, mode: str = "scram") -> dict[str, str]:
        """librdkafka settings for one of the listeners: `scram`, `plain` (both SASL_SSL) or `tls`
        (client certificate)."""
        common = {"ssl.ca.location": str(self.ca_pem)}
        if mode == "tls":
            return {**common, "bootstrap.servers": f"{endpoints.host}:{endpoints.kafka_tls_port}",
                    "security.protocol": "SSL", "ssl.certificate.location": str(self.client_cert),
                    "ssl.key.location": str(self.client_key)}
        user, mechanism, secret = ((KAFKA_SCRAM_USER, "SCRAM-SHA-512", "kafka-scram") if mode == "scram"
                                   else (KAFKA_PLAIN_USER, "PLAIN", "kafka-plain"))
        return {**common, "bootstrap.servers": endpoints.kafka_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": self.password(secret)}

    def cassandra_ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_pem))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def cassandra_cluster(self, endpoints: Endpoints, user: str = CASSANDRA_USER,
                          password: str | None = None, **options: Any) -> Any:
        """A cassandra-driver Cluster (not connected) with TLS and credentials."""
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster

        secret = self.password("cassandra") if password is None else password
        return Cluster([endpoints.cassandra_host], port=endpoints.cassandra_port, protocol_version=5,
                       ssl_context=self.cassandra_ssl_context(),
                       auth_provider=PlainTextAuthProvider(user, secret), **options)

    # ------------------------------------------------------------------ server configuration

    def kafka_properties(self, endpoints: Endpoints) -> str:
        """Lines appended to server.properties (later keys win in Java properties)."""
        port, tls, controller = endpoints.kafka_port, endpoints.kafka_tls_port, endpoints.kafka_controller_port
        listeners = f"SASL_SSL://127.0.0.1:{port},SSL://127.0.0.1:{tls},CONTROLLER://127.0.0.1:{controller}"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                 f'user_{KAFKA_PLAIN_USER}="{self.password("kafka-plain")}";')
        keystore_password = self.password("keystore")
        return "\n".join([
            "# Secured variant (cdc-bridge stack up --secure).",
            f"listeners={listeners}",
            f"advertised.listeners={listeners}",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
            "inter.broker.listener.name=SSL",
            "ssl.keystore.type=PKCS12",
            f"ssl.keystore.location={self.kafka_keystore}",
            f"ssl.keystore.password={keystore_password}",
            f"ssl.key.password={keystore_password}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_pem}",
            "listener.name.ssl.ssl.client.auth=required",
            "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={plain}",
            "",
        ])

    def kafka_format_arguments(self) -> list[str]:
        """SCRAM users are metadata records in KRaft: written when the storage is formatted."""
        return ["--add-scram", f"SCRAM-SHA-512=[name={KAFKA_SCRAM_USER},password={self.password('kafka-scram')}]"]

    def cassandra_settings(self) -> dict[str, str]:
        """Values of the cassandra.yaml template's security placeholders."""
        encryption = "\n".join([
            "client_encryption_options:",
            "  enabled: true",
            "  optional: false",
            "  require_client_auth: true",
            "  ssl_context_factory:",
            "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory",
            f"  keystore: {self.cassandra_keystore}",
            f"  truststore: {self.ca_pem}",
        ])
        return {"authenticator": "PasswordAuthenticator", "client_encryption": encryption}

    def cassandra_ready(self, endpoints: Endpoints) -> bool:
        """True once the bridge's role can log in over TLS. On a fresh node the first probe logs in
        as the default superuser, creates that role and gives the superuser a random password."""
        from cassandra import AuthenticationFailed
        from cassandra.cluster import NoHostAvailable

        try:
            return _probe(self.cassandra_cluster(endpoints, connect_timeout=3))
        except NoHostAvailable as error:
            if not _refused(error, AuthenticationFailed):
                return False
        except Exception:  # any other driver error simply means "not ready yet"
            return False
        try:
            # The default superuser appears a moment after the port opens; until then this fails
            # and the next probe tries again.
            self._create_roles(endpoints)
        except Exception:
            return False
        return False

    def _create_roles(self, endpoints: Endpoints) -> None:
        cluster = self.cassandra_cluster(endpoints, *_DEFAULT_SUPERUSER, connect_timeout=3)
        try:
            session = cluster.connect()
            session.execute("CREATE ROLE IF NOT EXISTS " + CASSANDRA_USER +
                            " WITH PASSWORD = %s AND LOGIN = true AND SUPERUSER = true",
                            (self.password("cassandra"),))
            session.execute("ALTER ROLE cassandra WITH PASSWORD = %s", (self.password("cassandra-admin"),))
        finally:
            cluster.shutdown()


def _probe(cluster: Any) -> bool:
    try:
        session = cluster.connect()
        return session.execute("SELECT release_version FROM system.local").one() is not None
    finally:
        cluster.shutdown()


def _refused(error: Any, kind: type[BaseException]) -> bool:
    return bool(error.errors) and all(isinstance(cause, kind) for cause in error.errors.values())
