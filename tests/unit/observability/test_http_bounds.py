"""The metrics port cannot be held by a client: a silent or trickling connection is dropped after
its timeout or deadline while the probes keep answering; too many at once are refused; and it
listens on `metrics.bind.address` only."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.observability import Health, Metrics, serve_http
from bridge.observability.http import MAX_CONNECTIONS, ProbeServer
from bridge.settings import load_config

TIMEOUT_S, DEADLINE_S = 0.5, 1.5


@pytest.fixture
def server() -> Iterator[ProbeServer]:
    metrics = Metrics()
    served = serve_http(0, metrics, Health(on_ready=metrics.ready.set), host="127.0.0.1",
                        request_timeout_s=TIMEOUT_S, request_deadline_s=DEADLINE_S)
    try:
        yield served
    finally:
        served.close()


def healthz(server: ProbeServer) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=2) as response:
        return int(response.status)


def closed_within(client: socket.socket, seconds: float) -> float:
    """Seconds until the server closed `client` (recv gives b"" or a reset)."""
    started = time.monotonic()
    client.settimeout(seconds)
    try:
        while client.recv(1024):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_a_silent_client_is_dropped_and_does_not_hold_the_probes(server: ProbeServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as silent:
        assert healthz(server) == 200  # answered while the silent one hangs on
        took = closed_within(silent, 5)
    assert TIMEOUT_S * 0.8 <= took < TIMEOUT_S + 1.5, took


def test_a_trickling_client_is_cut_at_the_deadline(server: ProbeServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as slow:
        slow.settimeout(0.1)
        started = time.monotonic()
        request = b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 200
        cut = None
        for byte in request:  # one byte every 0.2 s: never silent for TIMEOUT_S, never done
            try:
                slow.sendall(bytes([byte]))
                if slow.recv(1) == b"":
                    cut = time.monotonic() - started
                    break
            except TimeoutError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                cut = time.monotonic() - started
                break
            time.sleep(0.1)
    assert cut is not None and DEADLINE_S * 0.8 <= cut < DEADLINE_S + 1.5, cut


def test_connections_beyond_the_bound_are_closed_at_once(server: ProbeServer) -> None:
    held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)  # every held one has its handler thread
        with socket.create_connection(("127.0.0.1", server.port)) as extra:
            assert closed_within(extra, 2) < 0.5
    finally:
        for client in held:
            client.close()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            assert healthz(server) == 200
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise AssertionError("the probes did not answer again once the held connections closed")


def test_it_listens_on_the_bind_address_only() -> None:
    metrics = Metrics()
    served = serve_http(0, metrics, Health(on_ready=metrics.ready.set), host="127.0.0.2")  # loopback is 127/8
    try:
        with socket.create_connection(("127.0.0.2", served.port), timeout=2):
            pass
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", served.port), timeout=2):
            pass
    finally:
        served.close()


def test_the_bind_address_setting_defaults_to_every_interface(tmp_path: Path) -> None:
    config = tmp_path / "w.properties"
    config.write_text("name=n\ntopic.prefix=p\nscylla.cluster.ip.addresses=h:9042\nscylla.table.names=k.t\n"
                      "kafka.bootstrap.servers=b:9092\n")
    assert load_config(config).metrics_bind_address == "0.0.0.0"  # noqa: S104 (the default under test)
    assert load_config(config, overrides={"metrics.bind.address": "127.0.0.1"}).metrics_bind_address == "127.0.0.1"
