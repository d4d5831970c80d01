"""The probe and metrics port: `/metrics` (Prometheus text format), `/healthz`, `/readyz`.

A small threading HTTP server on its own daemon threads, so probes answer even while the main
loop is busy (that is what `/healthz` measures). 200 when the answer is yes, 503 when no, with
a one-line reason in the body.

Bound so that no client can hold it: a pause longer than `request_timeout_s` while a request is
read or its answer written drops the connection, a connection lasts `request_deadline_s` at most
however slowly it trickles, and beyond `MAX_CONNECTIONS` open at once new ones are closed at once
(so probes keep answering while a scanner or a stuck scraper hangs on).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

REQUEST_TIMEOUT_S = 5.0  # the longest pause while a request is read or its answer written
REQUEST_DEADLINE_S = 15.0  # the longest one connection may last, however it trickles
MAX_CONNECTIONS = 32  # handled at once; more are closed without an answer


class MetricsSource(Protocol):
    """What /metrics serves: a worker's `Metrics`, or a supervisor's merged registry."""

    @property
    def registry(self) -> CollectorRegistry: ...


class Probes(Protocol):
    """What /healthz and /readyz answer: (ok, one-line reason)."""

    def liveness(self) -> tuple[bool, str]: ...

    def readiness(self) -> tuple[bool, str]: ...


class _BoundedServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2 * MAX_CONNECTIONS  # (socketserver's 5 would leave connections unaccepted in the kernel)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET  # "::" binds IPv6
        super().__init__(address, handler)
        self._free = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._free.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._free.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._free.release()


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


def serve_http(port: int, metrics: MetricsSource, health: Probes, host: str = "0.0.0.0", *,
               request_timeout_s: float = REQUEST_TIMEOUT_S,
               request_deadline_s: float = REQUEST_DEADLINE_S) -> ProbeServer:
    """Serve on `host:port` (`metrics.bind.address`; port 0: any free port); raises OSError when
    the port is taken or the address is not this host's."""

    class Handler(BaseHTTPRequestHandler):
        timeout = request_timeout_s  # socket timeout of the connection (StreamRequestHandler)

        def setup(self) -> None:
            super().setup()
            self._deadline = threading.Timer(request_deadline_s, self._cut)
            self._deadline.daemon = True
            self._deadline.start()

        def _cut(self) -> None:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)  # the handler's blocked read or write ends

        def finish(self) -> None:
            self._deadline.cancel()
            with contextlib.suppress(OSError):  # the client went away, or was cut off
                super().finish()

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

    return ProbeServer(_BoundedServer((host, port), Handler))
