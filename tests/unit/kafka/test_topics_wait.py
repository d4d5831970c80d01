"""Whether a topic's metadata shows it published (every partition with a leader), as the
start-up wait of bridge/kafka/topics.py reads it (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from bridge.kafka.topics import _unpublished


def _partition(leader: int, error: object = None) -> SimpleNamespace:
    return SimpleNamespace(leader=leader, error=error)


def test_a_topic_is_published_once_every_partition_has_a_leader() -> None:
    assert _unpublished(None) == "no such topic"
    assert _unpublished(SimpleNamespace(error="LEADER_NOT_AVAILABLE", partitions={})) == "LEADER_NOT_AVAILABLE"
    assert _unpublished(SimpleNamespace(error=None, partitions={})) == "no partitions yet"
    half = SimpleNamespace(error=None, partitions={0: _partition(1), 1: _partition(-1), 2: _partition(1, "x")})
    assert _unpublished(half) == "partitions without a leader: [1, 2]"
    assert _unpublished(SimpleNamespace(error=None, partitions={0: _partition(1), 1: _partition(1)})) is None
