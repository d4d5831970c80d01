"""Which settings are secrets, and how they are shown masked: the `kafka.*` settings that hold
secrets (passed through to librdkafka, so known by name), and the password in a URL's user info
(`http://user:password@host`, e.g. a schema registry URL). `SecretStr` fields need no list: the
model masks them by type."""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

from bridge.observability.logs import is_secret_key

MASK = "**********"
# librdkafka settings that hold secrets (passed through under `kafka.`).
KAFKA_SECRETS = frozenset({"sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
                           "sasl.oauthbearer.client.secret", "ssl_key", "sasl.jaas.config",
                           "sasl.oauthbearer.config"})


def is_kafka_secret(name: str) -> bool:
    """Whether the `kafka.<name>` setting holds a secret (`<secret>.file` holds a path, shown as it is)."""
    return not name.endswith(".file") and (name in KAFKA_SECRETS or is_secret_key(name))


def is_secret_file(name: str) -> bool:
    """Whether `kafka.<name>` is `kafka.<secret>.file`: the file that holds a secret setting."""
    stem = name.removesuffix(".file")
    return stem != name and is_kafka_secret(stem)


def url_password(text: str) -> str | None:
    """The password of a URL's user info (`http://user:password@host`), if it has one."""
    if "://" not in text or "@" not in text:
        return None
    with contextlib.suppress(ValueError):
        return urlsplit(text).password
    return None


def masked_url(text: str) -> str:
    """`text` with the password of a URL's user info masked; any other text as it is."""
    password = url_password(text)
    return text if not password else text.replace(f":{password}@", f":{MASK}@", 1)
