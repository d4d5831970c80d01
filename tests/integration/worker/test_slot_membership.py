"""The slot group's member against the real broker: one kept out of its group for longer than its
rejoin bound is replaced by a new consumer while the broker answers, and the replacement gets the
slots; the replaced consumer's callbacks never reach the worker. With Kafka out of reach, the
member waits instead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import structlog
from confluent_kafka.admin import NewTopic

from bridge.kafka.slots import SlotMembership

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SLOTS = 4
# Another member of the group that joins, takes every slot and reports it; frozen (SIGSTOP) it
# holds up the next rebalance until its 10 s session expires on the broker.
OBSTACLE = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 10000,
                     "heartbeat.interval.ms": 1000, "partition.assignment.strategy": "cooperative-sticky"})
consumer.subscribe([sys.argv[3]], on_assign=lambda c, p: print("assigned", len(p), flush=True))
while True:
    consumer.poll(0.2)
"""


def _membership(bootstrap: str, topic: str, group: str, calls: list[tuple[str, set[int]]],
                rejoin_bound_s: float) -> SlotMembership:
    return SlotMembership({"bootstrap.servers": bootstrap}, topic, group, None,
                          on_assigned=lambda s: calls.append(("assigned", s)),
                          on_revoked=lambda s: calls.append(("revoked", s)),
                          on_lost=lambda s: calls.append(("lost", s)),
                          rejoin_bound_s=rejoin_bound_s)


def test_a_member_kept_out_of_its_group_is_replaced_and_the_replacement_gets_the_slots(
        kafka_bootstrap: str, kafka_admin: Any, topic_name: str) -> None:
    kafka_admin.create_topics([NewTopic(topic_name, SLOTS, 1)])[topic_name].result(30)
    group = f"{topic_name}-workers"
    obstacle = subprocess.Popen([sys.executable, "-c", OBSTACLE, kafka_bootstrap, group, topic_name],
                                stdout=subprocess.PIPE, text=True)
    membership = None
    try:
        assert obstacle.stdout is not None
        assert obstacle.stdout.readline().split() == ["assigned", str(SLOTS)]
        os.kill(obstacle.pid, signal.SIGSTOP)
        calls: list[tuple[str, set[int]]] = []
        members: set[str] = set()
        with structlog.testing.capture_logs() as logs:
            membership = _membership(kafka_bootstrap, topic_name, group, calls, rejoin_bound_s=4.0)
            deadline = time.monotonic() + 60
            while not any(kind == "assigned" and slots for kind, slots in calls) and time.monotonic() < deadline:
                membership.poll()
                members.add(membership.member_id() or "")
                time.sleep(0.05)
        replaced = [e for e in logs if e["event"] == "slot group not joined; starting a new member"]
        assert replaced, f"the member waiting on the frozen one was never replaced: {calls}"
        assert len(members - {""}) >= 2, members
        assert calls == [("assigned", set(range(SLOTS)))], "one assignment, of every slot"
        assert membership.owned == set(range(SLOTS))
    finally:
        obstacle.kill()  # SIGKILL ends a stopped process too
        obstacle.wait(10)
        if membership is not None:
            membership.close()


def test_a_member_waits_while_kafka_is_out_of_reach() -> None:
    calls: list[tuple[str, set[int]]] = []
    with structlog.testing.capture_logs() as logs:
        membership = _membership("127.0.0.1:1", "slots", "nobody-workers", calls, rejoin_bound_s=0.3)
        try:
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                membership.poll()
                time.sleep(0.05)
        finally:
            membership.close()
    assert [e for e in logs if e["event"].startswith("slot group not joined")] == []
    assert calls == []
