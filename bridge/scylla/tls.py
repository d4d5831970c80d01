"""TLS to the CQL cluster from the Java connector's `scylla.ssl.*` settings.

The Java connector reads a JKS/PKCS#12 truststore and keystore, or PEM files for its OpenSSL
provider. Python's `ssl` takes PEM, so: a truststore may be a PEM CA bundle or a PKCS#12 file (what
`keytool` writes by default since Java 9); a keystore is PKCS#12; `keyCertChain`/`privateKey` are
PEM. A JKS file is refused with the `keytool` command that converts it. The server's certificate
must name the address the driver connects to (hostname validation, on by default: the Java
connector does not check hostnames, which lets any certificate of the CA impersonate any node).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a key store is read: 30 ms of every command's start otherwise
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

PROVIDERS = frozenset({"JDK", "OPENSSL", "OPENSSL_REFCNT"})
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


class TlsSettingError(ValueError):
    """A `scylla.ssl.*` setting that cannot be used: `key` names it."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CqlTlsSettings:
    enabled: bool = False
    truststore_path: Path | None = None
    truststore_password: str | None = None
    keystore_path: Path | None = None
    keystore_password: str | None = None
    cert_chain: Path | None = None
    private_key: Path | None = None
    cipher_suites: str | None = None
    hostname_validation: bool = True


def ssl_context(settings: CqlTlsSettings) -> ssl.SSLContext | None:
    """The client context for the driver, or None when TLS is off. Reads every file now, so a bad
    path or password stops start-up with the key that names it."""
    if not settings.enabled:
        return None
    if settings.truststore_path is not None:
        # Like a Java truststore, the configured one replaces the system's CAs instead of adding to them.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _trust(context, settings.truststore_path, settings.truststore_password)
    else:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = settings.hostname_validation
    if (settings.cert_chain is None) != (settings.private_key is None):
        missing = "scylla.ssl.openssl.privateKey" if settings.private_key is None else "scylla.ssl.openssl.keyCertChain"
        raise TlsSettingError(missing, "required when the other one of scylla.ssl.openssl.keyCertChain and "
                                       "scylla.ssl.openssl.privateKey is set")
    if settings.keystore_path is not None and settings.cert_chain is not None:
        raise TlsSettingError("scylla.ssl.keystore.path", "set either a keystore or scylla.ssl.openssl.keyCertChain "
                                                          "and scylla.ssl.openssl.privateKey, not both")
    if settings.cert_chain is not None and settings.private_key is not None:
        _client_pem(context, settings.cert_chain, settings.private_key)
    if settings.keystore_path is not None:
        _client_pkcs12(context, settings.keystore_path, settings.keystore_password)
    if settings.cipher_suites:
        try:
            context.set_ciphers(":".join(part.strip() for part in settings.cipher_suites.split(",") if part.strip()))
        except ssl.SSLError:
            raise TlsSettingError("scylla.ssl.cipherSuites", "no cipher suite of the list is known to "
                                  "OpenSSL (use OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256)") from None
    return context


def _read(key: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsSettingError(key, f"cannot read {path}: {error.strerror}") from None


def _jks_hint(key: str, path: Path) -> TlsSettingError:
    target = path.with_suffix(".p12")
    return TlsSettingError(key, f"{path} is a JKS store, which only Java reads; convert it once with "
                                f"`keytool -importkeystore -srckeystore {path} -destkeystore {target} "
                                "-deststoretype PKCS12` and point this setting at the .p12 file")


def _load_pkcs12(key: str, path: Path, password: str | None) -> pkcs12.PKCS12KeyAndCertificates:
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = _read(key, path)
    if data.startswith(_JKS_MAGIC):
        raise _jks_hint(key, path)
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        password_key = key.replace(".path", ".password")
        raise TlsSettingError(key, f"{path} is neither PEM nor a PKCS#12 store that {password_key} opens") from None


def _trust(context: ssl.SSLContext, path: Path, password: str | None) -> None:
    from cryptography.hazmat.primitives import serialization

    key = "scylla.ssl.truststore.path"
    data = _read(key, path)
    if b"-----BEGIN CERTIFICATE-----" in data:
        pem = data.decode("ascii", errors="replace")
    else:
        store = _load_pkcs12(key, path, password)
        certs = [entry.certificate for entry in store.additional_certs]
        certs += [store.cert.certificate] if store.cert is not None else []
        if not certs:
            raise TlsSettingError(key, f"{path} holds no certificate")
        pem = "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in certs)
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as error:
        raise TlsSettingError(key, f"{path} holds no usable CA certificate ({error})") from None


def _client_pem(context: ssl.SSLContext, cert_chain: Path, private_key: Path) -> None:
    for key, path in (("scylla.ssl.openssl.keyCertChain", cert_chain), ("scylla.ssl.openssl.privateKey", private_key)):
        _read(key, path)
    try:
        # A password callable, even an empty one, stops OpenSSL from prompting on the terminal
        # for an encrypted key.
        context.load_cert_chain(str(cert_chain), str(private_key), password=lambda: b"")
    except ssl.SSLError as error:
        raise TlsSettingError("scylla.ssl.openssl.privateKey", f"{private_key} does not load with "
                                                               f"{cert_chain} ({error.reason or error}); "
                                                               "the key must be unencrypted PEM") from None


def _client_pkcs12(context: ssl.SSLContext, path: Path, password: str | None) -> None:
    from cryptography.hazmat.primitives import serialization

    key = "scylla.ssl.keystore.path"
    store = _load_pkcs12(key, path, password)
    if store.key is None or store.cert is None:
        raise TlsSettingError(key, f"{path} holds no private key with its certificate")
    chain: list[x509.Certificate] = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    # ssl loads a client key only from files: written encrypted with a one-off password into a
    # private temporary folder and removed as soon as OpenSSL has read it.
    one_off = os.urandom(24).hex().encode()
    with tempfile.TemporaryDirectory(prefix="cdc-bridge-tls-") as folder:
        key_file, cert_file = Path(folder) / "key.pem", Path(folder) / "chain.pem"
        key_file.write_bytes(store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.BestAvailableEncryption(one_off)))
        cert_file.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
        try:
            context.load_cert_chain(str(cert_file), str(key_file), password=one_off)
        except ssl.SSLError as error:
            raise TlsSettingError(key, f"{path}: the key does not match its certificate ({error.reason})") from None
