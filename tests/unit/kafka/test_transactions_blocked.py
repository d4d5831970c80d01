"""A transactional call that blocks on an unreachable Kafka still lets librdkafka's statistics
through: /readyz learns from them that Kafka is out of reach, and the call may block for its
whole timeout (a fault scenario once saw a worker cut off from Kafka answer ready, its main thread
held in such a call past the group's session timeout). A real librdkafka producer, pointed at a
port nothing listens on."""

from __future__ import annotations

import socket
import threading

import pytest

from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.transactions import TransactionalProducer
from bridge.observability.kafka_health import KafkaConnectivity


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_statistics_are_served_while_a_transactional_call_blocks() -> None:
    changes: list[tuple[bool, str]] = []
    threads: set[str] = set()
    connectivity = KafkaConnectivity(on_change=lambda ok, reason: changes.append((ok, reason)), interval_ms=200)
    settings = connectivity.client_settings()
    on_stats = settings["stats_cb"]

    def stats(text: str) -> None:
        threads.add(threading.current_thread().name)
        on_stats(text)

    config = {"bootstrap.servers": f"127.0.0.1:{_closed_port()}", **settings, "stats_cb": stats}
    with pytest.raises(KafkaUnavailableError):
        TransactionalProducer(config, "blocked-test", init_timeout_s=2.0)  # init_transactions blocks 2 s
    assert changes and changes[0][0] is False, f"Kafka out of reach was never reported: {changes}"
    assert "no broker connection up" in changes[0][1]
    assert threading.current_thread().name in threads, f"statistics served only on {threads}"
