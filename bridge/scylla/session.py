"""The CQL session the worker reads with: contact points, credentials, local DC, and a short
reconnection delay (the driver's default backs off up to ten minutes; the reader retries
forever but can only read once the driver is back)."""

from __future__ import annotations

import re
from typing import Any

from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy

from bridge.scylla import fast_collections, fast_uuid
from bridge.scylla.errors import SourceError


class ClusterUnavailableError(SourceError):
    """No contact point answered, or the credentials were refused."""


class CqlAccessError(ClusterUnavailableError):
    """The cluster answered but refused this client for good (credentials, certificates): `key`
    names the setting to fix. Retrying cannot help, so start-up stops at once."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


def _access_error(address: str, user: str | None, tls: bool, causes: list[str]) -> CqlAccessError | None:
    """The first cause that is a refusal, as one line naming the cluster, the problem and the key."""
    for cause in causes:
        if "Bad credentials" in cause or "Failed to authenticate" in cause:
            return CqlAccessError("scylla.password", f"CQL cluster {address} refused the credentials of user "
                                                     f"{user!r} ({_server_message(cause)})")
        if "requires authentication" in cause:
            return CqlAccessError("scylla.user", f"CQL cluster {address} requires authentication; set scylla.user "
                                                 "and scylla.password (or scylla.password.file)")
        if "Hostname mismatch" in cause or "IP address mismatch" in cause:
            return CqlAccessError("scylla.ssl.hostname.validation", f"the certificate of CQL cluster {address} does "
                                                                    f"not name that address ({_ssl_reason(cause)})")
        if "CERTIFICATE_VERIFY_FAILED" in cause:
            return CqlAccessError("scylla.ssl.truststore.path", f"the certificate of CQL cluster {address} is not "
                                                                f"trusted ({_ssl_reason(cause)})")
        if tls and ("EOF occurred in violation of protocol" in cause or "alert" in cause.lower()):
            return CqlAccessError("scylla.ssl.keystore.path", f"CQL cluster {address} ended the TLS handshake: it "
                                                              "may require a client certificate (scylla.ssl.keystore."
                                                              "path or scylla.ssl.openssl.keyCertChain) it trusts")
    return None


def _server_message(cause: str) -> str:
    found = re.search(r"\[([^\]]+)\] message=\"([^\"]*)\"", cause)
    return f"{found.group(1)}: {found.group(2)}" if found else cause


def _ssl_reason(cause: str) -> str:
    found = re.search(r"certificate verify failed: ([^(]+)", cause)
    return found.group(1).strip() if found else cause


PROTOCOL_VERSION = 4


def connect(
    contact_points: list[tuple[str, int]],
    *,
    user: str | None = None,
    password: str | None = None,
    local_dc: str | None = None,
    ssl_context: Any = None,
    connect_timeout_s: float = 10.0,
) -> tuple[Any, Any]:
    """(cluster, session); raises ClusterUnavailableError with the addresses and the cause."""
    fast_uuid.install()
    fast_collections.install()
    cluster = Cluster(
        [host for host, _ in contact_points],
        port=contact_points[0][1],  # the driver takes one port for all contact points
        auth_provider=PlainTextAuthProvider(user, password) if user else None,
        execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc)))},
        reconnection_policy=ExponentialReconnectionPolicy(0.5, 5.0),
        ssl_context=ssl_context,
        connect_timeout=connect_timeout_s,
        # ScyllaDB's highest protocol version. Cassandra 5 (our tests' server) would otherwise
        # agree on v5, whose framing checks a CRC24 per segment header in pure Python and a CRC32
        # per segment: 0.7-1.9 µs more driver CPU per log row, a cost no ScyllaDB user pays.
        protocol_version=PROTOCOL_VERSION,
    )
    try:
        return cluster, cluster.connect()
    except NoHostAvailable as error:
        cluster.shutdown()
        addresses = ",".join(f"{h}:{p}" for h, p in contact_points)
        refused = _access_error(addresses, user, ssl_context is not None, [str(c) for c in error.errors.values()])
        if refused is not None:
            raise refused from None
        causes = "; ".join(f"{host}: {cause}" for host, cause in error.errors.items()) or str(error)
        # A TLS-only node drops a plaintext client's first frame: say what that usually means.
        dropped = ssl_context is None and any("reset by peer" in str(c) for c in error.errors.values())
        hint = "; if the cluster takes TLS only, set scylla.ssl.enabled=true" if dropped else ""
        raise ClusterUnavailableError(f"no CQL host of {addresses} answered ({causes}){hint}") from None
