"""Kafka reachability from librdkafka's statistics and errors."""

from __future__ import annotations

import json

from confluent_kafka import KafkaError

from bridge.observability.kafka_health import KafkaConnectivity, brokers_up


def stats(name: str, *states: str) -> str:
    brokers = {f"127.0.0.1:9092/{i}": {"name": f"b{i}", "nodeid": i, "state": s} for i, s in enumerate(states)}
    return json.dumps({"name": name, "type": "producer", "brokers": brokers})


def test_a_client_is_connected_while_one_broker_is_up() -> None:
    assert brokers_up(json.loads(stats("p", "INIT", "UP")))
    assert not brokers_up(json.loads(stats("p", "DOWN", "CONNECT", "TRY_CONNECT")))
    assert not brokers_up({"name": "p"})


def test_changes_are_reported_once_each() -> None:
    changes: list[tuple[bool, str]] = []
    connectivity = KafkaConnectivity(lambda ok, why: changes.append((ok, why)))
    settings = connectivity.client_settings()
    assert settings["statistics.interval.ms"] == 1000 and callable(settings["stats_cb"])
    connectivity.on_stats(stats("producer-1", "UP"))
    connectivity.on_stats(stats("consumer-2", "UP"))
    assert changes == []  # reachable from the start
    connectivity.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    connectivity.on_error(KafkaError(KafkaError._TRANSPORT, "connection refused"))
    connectivity.on_stats(stats("producer-1", "CONNECT"))
    assert changes == [(False, "kafka unreachable: 1/1 brokers are down")]
    connectivity.on_stats(stats("producer-1", "UP"))
    assert len(changes) == 1  # the consumer has not reported back yet
    connectivity.on_stats(stats("consumer-2", "UP"))
    assert changes[-1] == (True, "kafka reachable") and len(changes) == 2
    connectivity.on_stats("not json")
    assert len(changes) == 2


def test_a_client_that_stopped_reporting_no_longer_counts() -> None:
    """A replaced producer's last report said "down"; its successor's "up" must make Kafka reachable."""
    now = [0.0]
    changes: list[tuple[bool, str]] = []
    connectivity = KafkaConnectivity(lambda ok, why: changes.append((ok, why)), clock=lambda: now[0])
    connectivity.on_stats(stats("producer-4", "DOWN"))
    connectivity.on_stats(stats("consumer-5", "DOWN"))
    assert changes[-1][0] is False
    now[0] = 10.0  # producer-4 was replaced and never reports again
    connectivity.on_stats(stats("consumer-5", "UP"))
    connectivity.on_stats(stats("producer-6", "UP"))
    assert changes[-1] == (True, "kafka reachable")
