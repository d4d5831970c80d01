"""`scylla.ssl.*` into an SSLContext: PEM and PKCS#12 stores, one error naming the key for every
file that cannot be used, the configured truststore replacing the system's CAs."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from bridge.scylla.tls import CqlTlsSettings, TlsSettingError, ssl_context
from bridge_devstack.stack.certs import Issued, issue, new_ca


@pytest.fixture(scope="module")
def ca() -> Issued:
    return new_ca("unit CA")


@pytest.fixture(scope="module")
def client(ca: Issued) -> Issued:
    return issue(ca, "unit client", server=False, client=True)


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def subjects(context: ssl.SSLContext) -> list[str]:
    return [dict(entry[0] for entry in cert["subject"])["commonName"] for cert in context.get_ca_certs()]


def test_off_means_no_context() -> None:
    assert ssl_context(CqlTlsSettings(enabled=False, truststore_path=Path("/nowhere"))) is None


def test_pem_truststore_replaces_the_system_cas(ca: Issued, tmp_path: Path) -> None:
    context = ssl_context(CqlTlsSettings(enabled=True, truststore_path=write(tmp_path, "ca.pem", ca.cert_pem())))
    assert context is not None
    assert subjects(context) == ["unit CA"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_without_truststore_the_system_cas_are_used() -> None:
    context = ssl_context(CqlTlsSettings(enabled=True, hostname_validation=False))
    assert context is not None and not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_pkcs12_truststore_with_its_password(ca: Issued, tmp_path: Path) -> None:
    data = pkcs12.serialize_key_and_certificates(None, None, None, [ca.chain[0]],
                                                 serialization.BestAvailableEncryption(b"trust-pw"))
    store = write(tmp_path, "trust.p12", data)
    context = ssl_context(CqlTlsSettings(enabled=True, truststore_path=store, truststore_password="trust-pw"))
    assert context is not None and subjects(context) == ["unit CA"]
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, truststore_path=store, truststore_password="wrong"))
    assert error.value.key == "scylla.ssl.truststore.path"
    assert "scylla.ssl.truststore.password" in error.value.reason
    assert "wrong" not in str(error.value)


def test_jks_is_refused_with_the_conversion_command(tmp_path: Path) -> None:
    store = write(tmp_path, "trust.jks", b"\xfe\xed\xfe\xed" + b"\0" * 60)
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, truststore_path=store))
    assert error.value.key == "scylla.ssl.truststore.path"
    assert f"keytool -importkeystore -srckeystore {store}" in error.value.reason


def test_missing_file_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(TlsSettingError, match=r"^scylla.ssl.truststore.path: cannot read .*missing.pem"):
        ssl_context(CqlTlsSettings(enabled=True, truststore_path=tmp_path / "missing.pem"))


def test_pem_client_certificate(ca: Issued, client: Issued, tmp_path: Path) -> None:
    chain, key = write(tmp_path, "client.pem", client.cert_pem()), write(tmp_path, "client.key", client.key_pem())
    assert ssl_context(CqlTlsSettings(enabled=True, cert_chain=chain, private_key=key)) is not None
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, cert_chain=chain))
    assert error.value.key == "scylla.ssl.openssl.privateKey"
    other = write(tmp_path, "other.key", issue(ca, "x", server=False, client=True).key_pem())
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, cert_chain=chain, private_key=other))
    assert error.value.key == "scylla.ssl.openssl.privateKey"


def test_an_encrypted_pem_key_fails_instead_of_prompting(client: Issued, tmp_path: Path) -> None:
    chain = write(tmp_path, "client.pem", client.cert_pem())
    key = write(tmp_path, "client.key", client.key_pem(password="key-pw"))
    with pytest.raises(TlsSettingError, match="unencrypted PEM"):
        ssl_context(CqlTlsSettings(enabled=True, cert_chain=chain, private_key=key))


def test_pkcs12_keystore(client: Issued, tmp_path: Path) -> None:
    store = write(tmp_path, "client.p12", client.pkcs12("ks-pw", "client"))
    assert ssl_context(CqlTlsSettings(enabled=True, keystore_path=store, keystore_password="ks-pw")) is not None
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, keystore_path=store, keystore_password="nope"))
    assert error.value.key == "scylla.ssl.keystore.path"


def test_keystore_and_pem_pair_are_exclusive(client: Issued, tmp_path: Path) -> None:
    chain, key = write(tmp_path, "client.pem", client.cert_pem()), write(tmp_path, "client.key", client.key_pem())
    store = write(tmp_path, "client.p12", client.pkcs12("ks-pw", "client"))
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, keystore_path=store, keystore_password="ks-pw",
                                   cert_chain=chain, private_key=key))
    assert error.value.key == "scylla.ssl.keystore.path"


def test_cipher_suites(tmp_path: Path) -> None:
    context = ssl_context(CqlTlsSettings(enabled=True, cipher_suites="ECDHE-RSA-AES128-GCM-SHA256, "
                                                                      "ECDHE-RSA-AES256-GCM-SHA384"))
    assert context is not None
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"}
    with pytest.raises(TlsSettingError) as error:
        ssl_context(CqlTlsSettings(enabled=True, cipher_suites="NO-SUCH-CIPHER"))
    assert error.value.key == "scylla.ssl.cipherSuites"
