"""Fail fast on Kafka settings that can never work: a refused password, an untrusted broker
certificate, a client certificate the broker rejects, an unknown client property.

librdkafka treats all of them as transient: it reconnects forever and reports each attempt to the
error callback, so without this check a worker with a wrong password would wait out every Kafka
timeout (minutes) before saying anything useful. One short probe before start-up turns the first
such report into one error naming the setting, the cluster and the problem."""

from __future__ import annotations

import re
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError

# librdkafka's "(after 362ms in state AUTH_REQ)" and "sasl_ssl://host:port/bootstrap: " add noise.
_TIMING = re.compile(r"\s*\(after \d+ms in state [A-Z_]+\)")
_BROKER = re.compile(r"^[a-z_]+://[^ ]+?: ")
_PROPERTY = re.compile(r'property:? "([a-z0-9._]+)"')
_DOTTED = re.compile(r"\b[a-z]+(?:\.[a-z0-9_]+)+\b")


class KafkaAccessError(KafkaSettingError):
    """Kafka refused this client for good: `key` is the setting to fix."""


def check_client_settings(config: dict[str, str]) -> None:
    """Build (and drop) a client with these settings without waiting for any broker: librdkafka
    refuses an unknown property or a bad value here. Raises KafkaAccessError naming it."""
    try:
        AdminClient({**with_logger(config), "log_level": 0})
    except KafkaException as error:
        raise _bad_setting(error.args[0].str(), config) from None


def check_access(config: dict[str, str], timeout_s: float) -> None:
    """Return once a broker answered a metadata request with these settings. Raises KafkaAccessError
    at the first authentication or TLS refusal, KafkaUnavailableError when no broker answered."""
    refusals: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if _is_refusal(error):
            refusals.append(error)

    cluster = config.get("bootstrap.servers", "?")
    try:
        settings: dict[str, Any] = {**with_logger(config), "error_cb": on_error}
        admin = AdminClient(settings)
    except KafkaException as error:
        raise _bad_setting(error.args[0].str(), config) from None
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            return
        except KafkaException as error:
            last = _clean(error.args[0].str())
        admin.poll(0.1)  # error callbacks run only inside poll()
        if refusals:
            raise _refused(cluster, config, refusals[0])
    raise KafkaUnavailableError(f"Kafka {cluster} did not answer within {timeout_s:.0f} s ({last})")


def _is_refusal(error: KafkaError) -> bool:
    if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
        return True
    # The broker rejecting our certificate (or sending none we accept) arrives as a TLS alert on
    # the transport, not as an SSL error of our own handshake.
    return error.code() == KafkaError._TRANSPORT and "ssl/tls alert" in error.str().lower()


def _clean(message: str) -> str:
    return _TIMING.sub("", _BROKER.sub("", message)).strip()


def _refused(cluster: str, config: dict[str, str], error: KafkaError) -> KafkaAccessError:
    detail = _clean(error.str())
    if error.code() == KafkaError._AUTHENTICATION:
        user = config.get("sasl.username", "")
        mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))
        return KafkaAccessError("kafka.sasl.password", f"Kafka {cluster} refused the credentials of user "
                                                       f"{user!r} ({mechanism}): {detail}")
    if "certificate verify failed" in detail:
        return KafkaAccessError("kafka.ssl.ca.location", f"the certificate of Kafka {cluster} is not trusted: "
                                                         f"{detail}")
    if error.code() == KafkaError._TRANSPORT:
        return KafkaAccessError("kafka.ssl.certificate.location", f"Kafka {cluster} rejected the TLS connection "
                                                                  f"(client certificate missing or not trusted): "
                                                                  f"{detail}")
    return KafkaAccessError("kafka.security.protocol", f"TLS with Kafka {cluster} failed: {detail}")


def _bad_setting(message: str, config: dict[str, str]) -> KafkaAccessError:
    """librdkafka refuses an unknown property or a bad value when the client is built; name the
    setting its message is about (it quotes it, mentions it, or, for Java truststores, neither)."""
    found = _PROPERTY.search(message)
    mentioned = [word for word in _DOTTED.findall(message) if word in config]
    if found:
        name = found.group(1)
    elif mentioned:
        name = mentioned[0]
    elif "TrustStore" in message and "ssl.truststore.location" in config:
        name = "ssl.truststore.location"
    else:
        name = next(iter(_DOTTED.findall(message)), "*")
    return KafkaAccessError(f"kafka.{name}", _clean(message.removeprefix("Failed to create admin client: ")))
