"""Certificates for the secured local stack: one throw-away CA that signs the servers' and a client's
certificate, made with `cryptography` (a real X.509 CA with the extensions TLS stacks check:
basic constraints, key usage, subject alternative names), never with hand-rolled DER."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for any local stack's life, short enough not to look like a production CA.
VALID_DAYS = 825
_LOOPBACK_NAMES = ("localhost",)
_LOOPBACK_IPS = ("127.0.0.1",)


@dataclass(frozen=True, slots=True)
class Issued:
    """A private key and its certificate chain (leaf first)."""

    key: rsa.RSAPrivateKey
    chain: tuple[x509.Certificate, ...]

    def cert_pem(self) -> bytes:
        return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in self.chain)

    def key_pem(self, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

    def pkcs12(self, password: str, alias: str) -> bytes:
        """A PKCS#12 keystore Java and OpenSSL both read (PBES2/AES-256, SHA-256 MAC)."""
        encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                      .kdf_rounds(50_000)
                      .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
                      .hmac_hash(hashes.SHA256())
                      .build(password.encode()))
        return pkcs12.serialize_key_and_certificates(alias.encode(), self.key, self.chain[0],
                                                     list(self.chain[1:]) or None, encryption)


def _key() -> rsa.RSAPrivateKey:
    # RSA rather than EC: every TLS stack involved (JDK, OpenSSL, Cassandra's PEM reader) takes it.
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "scylla-cdc-bridge local stack"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    # Backdated a little: a server whose clock is slightly behind must not reject a fresh cert.
    return builder.not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(
        now + datetime.timedelta(days=VALID_DAYS))


def new_ca(common_name: str = "cdc-bridge local CA") -> Issued:
    key = _key()
    subject = _name(common_name)
    cert = (_validity(x509.CertificateBuilder())
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(key, (cert,))


def issue(ca: Issued, common_name: str, *, server: bool, client: bool) -> Issued:
    """A leaf certificate signed by `ca`, valid for loopback names and addresses when `server`."""
    import ipaddress

    key = _key()
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    builder = (_validity(x509.CertificateBuilder())
               .subject_name(_name(common_name)).issuer_name(ca.chain[0].subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                            crl_sign=False, content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    if server:
        names: list[x509.GeneralName] = [x509.DNSName(name) for name in _LOOPBACK_NAMES]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in _LOOPBACK_IPS]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return Issued(key, (cert, ca.chain[0]))


def write_private(path: Path, data: bytes) -> Path:
    """Write a file only its owner can read (keys, keystores, passwords)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    return path
