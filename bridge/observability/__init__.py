"""What operators see of a worker: structured logs, Prometheus metrics, health and readiness
probes, and a progress line on a terminal. `docs/operations.md` lists every metric.

The names below are imported when first used (`__getattr__`): the settings need only
`bridge.observability.logs`, and a command that only reads Kafka does not load the metrics
and probe servers (prometheus_client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.lazy_names import lazy_names

if TYPE_CHECKING:
    from bridge.observability.health import Health, ReadinessGates
    from bridge.observability.http import ProbeServer, serve_http
    from bridge.observability.logs import configure_logging, register_secret
    from bridge.observability.metrics import Metrics

_WHERE = {
    "Health": "bridge.observability.health",
    "Metrics": "bridge.observability.metrics",
    "ProbeServer": "bridge.observability.http",
    "ReadinessGates": "bridge.observability.health",
    "configure_logging": "bridge.observability.logs",
    "register_secret": "bridge.observability.logs",
    "serve_http": "bridge.observability.http",
}

__all__ = ["Health", "Metrics", "ProbeServer", "ReadinessGates", "configure_logging", "register_secret",
           "serve_http"]


__getattr__ = lazy_names(__name__, _WHERE, globals())
