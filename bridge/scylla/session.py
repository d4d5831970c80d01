"""The CQL session the worker reads with: contact points, credentials, local DC, and a short
reconnection delay (the driver's default backs off up to ten minutes; the reader retries
forever but can only read once the driver is back)."""

from __future__ import annotations

from typing import Any

from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy

from bridge.scylla.errors import SourceError


class ClusterUnavailableError(SourceError):
    """No contact point answered, or the credentials were refused."""


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
    cluster = Cluster(
        [host for host, _ in contact_points],
        port=contact_points[0][1],  # the driver takes one port for all contact points
        auth_provider=PlainTextAuthProvider(user, password) if user else None,
        execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc)))},
        reconnection_policy=ExponentialReconnectionPolicy(0.5, 5.0),
        ssl_context=ssl_context,
        connect_timeout=connect_timeout_s,
    )
    try:
        return cluster, cluster.connect()
    except NoHostAvailable as error:
        cluster.shutdown()
        causes = "; ".join(f"{host}: {cause}" for host, cause in error.errors.items()) or str(error)
        addresses = ",".join(f"{h}:{p}" for h, p in contact_points)
        raise ClusterUnavailableError(f"no CQL host of {addresses} answered ({causes})") from None
