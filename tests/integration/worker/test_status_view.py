"""The REST status view (bridge/control/status_view.py) on the real broker: a request is answered
from memory, which its thread keeps current from the status and control topics, and `sync` reads
exactly as of its call (what the REST API does after a change it was asked for, and before
offsets are changed). Issue 42: each status request used to make three clients and read both
topics from their beginning, 3.6 s at p99 under CPU load."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from bridge.control.control_records import TargetState, TargetStateRecord, encode_target_state
from bridge.control.status_view import StatusView
from bridge.kafka.status_topic import StatusWriter
from tests.integration.worker.harness import wait_for

pytestmark = pytest.mark.integration


class _Counting:
    """The view's admin client, counting what each request would have asked Kafka."""

    def __init__(self, admin: Any) -> None:
        self._admin, self.asked = admin, 0

    def __getattr__(self, name: str) -> Any:
        self.asked += 1
        return getattr(self._admin, name)


@pytest.fixture
def view(kafka_bootstrap: str, topic_name: str, make_topic: Callable[..., str]) -> Iterator[StatusView]:
    make_topic(f"{topic_name}-status", config={"cleanup.policy": "compact"})
    make_topic(f"{topic_name}-config", config={"cleanup.policy": "compact"})
    found = StatusView({"bootstrap.servers": kafka_bootstrap}, topic_name, f"{topic_name}-status",
                       f"{topic_name}-config", 4)
    yield found
    found.close()


def _tasks(status: dict[str, Any]) -> list[str]:
    return [task["state"] for task in status["tasks"]]


def test_the_status_is_served_from_memory_kept_current_and_exact_after_a_sync(
        view: StatusView, kafka_bootstrap: str, topic_name: str) -> None:
    kafka = {"bootstrap.servers": kafka_bootstrap}
    writer = StatusWriter(kafka, f"{topic_name}-status", "w1")
    writer.publish("m1", {}, slots=[0, 1])
    writer._producer.flush(10)
    first = view.sync(30)  # a record written before the call is in its answer
    assert first["connector"]["state"] == "RUNNING" and _tasks(first) == ["RUNNING", "RUNNING", "UNASSIGNED",
                                                                          "UNASSIGNED"]
    counting = _Counting(view._admin)
    view._admin = counting
    asked = time.monotonic()
    for _ in range(50):
        assert view.status() == first
    assert time.monotonic() - asked < 1.0  # 50 answers from memory
    writer.publish("m1", {}, state="PAUSED", slots=[0, 1, 2])
    writer._producer.flush(10)
    wait_for(lambda: _tasks(view.status()) == ["PAUSED", "PAUSED", "PAUSED", "UNASSIGNED"], 10,
             "the view to apply the worker's new record")
    assert counting.asked <= 20  # the thread's group descriptions (one a second), no request's
    producer = Producer(kafka)
    key, value = encode_target_state(topic_name, TargetStateRecord(TargetState.PAUSED, "test", 0))
    producer.produce(f"{topic_name}-config", value, key)
    producer.flush(10)
    assert view.sync(30)["connector"]["state"] == "PAUSED" and view.target_state() is TargetState.PAUSED
    writer.close()  # the worker's tombstone: it is gone
    wait_for(lambda: view.status()["connector"]["state"] == "UNASSIGNED", 10, "the worker's record removed")
