"""Probes over real HTTP: /healthz fails once the loop stops turning, /readyz follows the gates."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from bridge.observability import Health, Metrics, ReadinessGates, serve_http
from bridge.observability.http import ProbeServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def get(server: ProbeServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def setup(clock: Clock) -> Iterator[tuple[Health, Metrics, ProbeServer]]:
    metrics = Metrics()
    health = Health(loop_bound_s=30, clock=clock, on_ready=metrics.ready.set)
    server = serve_http(0, metrics, health, host="127.0.0.1")
    try:
        yield health, metrics, server
    finally:
        server.close()


def test_healthz_fails_when_the_loop_stops_turning(setup: tuple[Health, Metrics, ProbeServer], clock: Clock) -> None:
    health, _, server = setup
    assert get(server, "/healthz")[0] == 200  # start-up counts as a turn
    clock.now += 25
    health.beat()
    clock.now += 29
    assert get(server, "/healthz")[0] == 200
    clock.now += 2  # 31 s since the last turn: the loop is stuck
    status, body = get(server, "/healthz")
    assert status == 503 and "main loop stalled: last turn 31.0 s ago (bound 30 s)" in body
    health.beat()
    assert get(server, "/healthz")[0] == 200


def test_readyz_needs_every_gate_and_names_the_first_failing(setup: tuple[Health, Metrics, ProbeServer]) -> None:
    health, _, server = setup
    gates = ReadinessGates(health, ["group", "producer", "kafka"], initially_ok=["kafka"])
    status, body = get(server, "/readyz")
    assert status == 503 and "group: not yet" in body
    gates.set("producer", True)
    gates.set("group", True)
    assert get(server, "/readyz") == (200, "ok: ready\n")
    assert "cdc_bridge_ready 1.0" in get(server, "/metrics")[1]
    gates.set("kafka", False, "kafka unreachable: no broker connection up")
    status, body = get(server, "/readyz")
    assert status == 503 and body == "not ok: kafka unreachable: no broker connection up\n"
    assert "cdc_bridge_ready 0.0" in get(server, "/metrics")[1]
    gates.set("kafka", True)
    assert get(server, "/readyz")[0] == 200
    with pytest.raises(KeyError):
        gates.set("nonsense", True)


def test_metrics_are_served_in_the_prometheus_format(setup: tuple[Health, Metrics, ProbeServer]) -> None:
    _, metrics, server = setup
    metrics.declare_tables([("ks", "t")])
    metrics.produced("ks", "t", "c", 3)
    status, body = get(server, "/metrics")
    assert status == 200
    assert 'cdc_bridge_records_produced_total{keyspace="ks",op="c",table="t"} 3.0' in body
    assert get(server, "/nope")[0] == 404


def test_a_taken_port_raises() -> None:
    metrics, health = Metrics(), Health()
    first = serve_http(0, metrics, health, host="127.0.0.1")
    try:
        with pytest.raises(OSError):
            serve_http(first.port, metrics, health, host="127.0.0.1")
    finally:
        first.close()
