"""The probe and metrics port: `/metrics` (Prometheus text format), `/healthz`, `/readyz`.

A small threading HTTP server on its own daemon threads, so probes answer even while the main
loop is busy (that is what `/healthz` measures). 200 when the answer is yes, 503 when no, with
a one-line reason in the body.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bridge.observability.health import Health
from bridge.observability.metrics import Metrics


class ProbeServer:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="probe-http", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_http(port: int, metrics: Metrics, health: Health, host: str = "0.0.0.0") -> ProbeServer:
    """Serve on `host:port` (0: any free port); raises OSError when the port is taken."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._probe(*health.liveness())
            elif path == "/readyz":
                self._probe(*health.readiness())
            else:
                self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _probe(self, ok: bool, reason: str) -> None:
            self._answer(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {reason}\n".encode())

        def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # a probe every few seconds is not news

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return ProbeServer(server)
