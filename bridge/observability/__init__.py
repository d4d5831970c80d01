"""What operators see of a worker: structured logs, Prometheus metrics, health and readiness
probes, and a progress line on a terminal. `docs/operations.md` lists every metric."""

from bridge.observability.health import Health, ReadinessGates
from bridge.observability.http import ProbeServer, serve_http
from bridge.observability.logs import configure_logging, register_secret
from bridge.observability.metrics import Metrics

__all__ = ["Health", "Metrics", "ProbeServer", "ReadinessGates", "configure_logging", "register_secret",
           "serve_http"]
