"""Serving the REST API: uvicorn on its own thread (its own event loop), one server per
`listeners` entry, TLS from PEM files for https listeners (client certificates as
`listeners.https.ssl.client.auth` says).

Why uvicorn and Starlette: the metrics port's stdlib server (bridge/observability/http.py) has no
routing, no TLS and no request bodies; a second hand-written server for thirty routes with
bodies, auth and TLS would be ours to keep safe. uvicorn (with h11) is the most used Python HTTP
server, with TLS and bounds built in; Starlette gives routing, path parameters and JSON answers,
and runs our blocking handlers on its thread pool. Both are small and pure Python.

Bounded like the metrics port: at most `MAX_CONNECTIONS` connections and requests at once (more
get 503 from uvicorn), headers bounded by h11 (`MAX_HEADER_BYTES`), bodies by the app (1 MiB),
and a connection lasts `REQUEST_DEADLINE_S` at most however slowly it trickles (`_DeadlineH11`:
uvicorn has no header-read timeout of its own), idle keep-alive `KEEP_ALIVE_S`.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from typing import Any

import structlog
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from bridge.control.rest.app import build_app
from bridge.control.rest.auth import Credentials
from bridge.control.rest.backend import KafkaBackend
from bridge.settings import BridgeConfig, ConfigError
from bridge.settings.rest_listeners import Listener, parse_listeners

log = structlog.get_logger(__name__)
MAX_CONNECTIONS = 32
MAX_HEADER_BYTES = 64 * 1024
REQUEST_DEADLINE_S = 30.0  # validate and offsets read Kafka: longer than the metrics port's 15 s
KEEP_ALIVE_S = 5
START_TIMEOUT_S = 10.0


class _DeadlineH11(H11Protocol):
    """uvicorn's h11 protocol with a bound on each connection's life (slow-loris)."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._deadline = asyncio.get_running_loop().call_later(REQUEST_DEADLINE_S, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.cancel()
        super().connection_lost(exc)


class RestServer:
    """The running listeners; `close` stops them (within a second or two)."""

    def __init__(self, servers: list[tuple[Listener, uvicorn.Server, threading.Thread]],
                 backend: KafkaBackend) -> None:
        self._servers, self._backend = servers, backend

    @property
    def listeners(self) -> list[str]:
        return [str(listener) for listener, _server, _thread in self._servers]

    def close(self) -> None:
        for _listener, server, _thread in self._servers:
            server.should_exit = True
        for _listener, _server, thread in self._servers:
            thread.join(5)
        self._backend.close()


def serve_rest(config: BridgeConfig, kafka: dict[str, str]) -> RestServer | None:
    """Start the REST API on every listener (None when `listeners` is empty). Raises ConfigError
    naming the setting when a listener cannot be served (port taken, TLS files unreadable)."""
    listeners = parse_listeners(config.listeners)
    if not listeners:
        return None
    credentials = Credentials.load(config.rest_credentials_file) if config.rest_credentials_file else None
    backend = KafkaBackend(config, kafka)
    running: list[tuple[Listener, uvicorn.Server, threading.Thread]] = []
    try:
        for listener in listeners:
            app = build_app(backend, credentials, writes_open=listener.loopback)
            server = uvicorn.Server(uvicorn.Config(
                app, host=listener.host, port=listener.port, http=_DeadlineH11, lifespan="off", access_log=False,
                log_config=None, limit_concurrency=MAX_CONNECTIONS, backlog=2 * MAX_CONNECTIONS,
                timeout_keep_alive=KEEP_ALIVE_S, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
                server_header=False, **_tls(config, listener)))
            thread = threading.Thread(target=server.run, name=f"rest-{listener.port}", daemon=True)
            thread.start()
            running.append((listener, server, thread))
            _wait_started(server, thread, listener)
    except BaseException:
        RestServer(running, backend).close()
        raise
    log.info("rest api serving", listeners=[str(item) for item in listeners], auth=credentials is not None)
    return RestServer(running, backend)


def _tls(config: BridgeConfig, listener: Listener) -> dict[str, Any]:
    if listener.scheme != "https":
        return {}
    if config.rest_keystore is None:
        raise ConfigError("listeners.https.ssl.keystore.location", f"required for the listener {listener}")
    for key, path in (("listeners.https.ssl.keystore.location", config.rest_keystore),
                      ("listeners.https.ssl.key.location", config.rest_key),
                      ("listeners.https.ssl.truststore.location", config.rest_truststore)):
        if path is not None and not path.is_file():
            raise ConfigError(key, f"{path} is not a readable file")
    if config.rest_client_auth != "none" and config.rest_truststore is None:
        raise ConfigError("listeners.https.ssl.truststore.location",
                          f"required with listeners.https.ssl.client.auth={config.rest_client_auth}")
    reqs = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    return {"ssl_certfile": str(config.rest_keystore), "ssl_keyfile": str(config.rest_key or config.rest_keystore),
            "ssl_ca_certs": str(config.rest_truststore) if config.rest_truststore else None,
            "ssl_cert_reqs": reqs[config.rest_client_auth]}


def _wait_started(server: uvicorn.Server, thread: threading.Thread, listener: Listener) -> None:
    """uvicorn binds on its thread; a bind that fails ends that thread without `started`."""
    deadline = threading.Event()
    waited = 0.0
    while not server.started and thread.is_alive() and waited < START_TIMEOUT_S:
        deadline.wait(0.05)
        waited += 0.05
    if not server.started:
        server.should_exit = True
        raise ConfigError("listeners", f"{listener}: cannot listen (address in use, or not this host's?)")
