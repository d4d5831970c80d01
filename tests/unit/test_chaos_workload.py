"""The chaos workload's check (tests/integration/worker/chaos.py): an update whose chunk landed
later than the workers' confidence window may be missing, as ScyllaDB's own late writes may be,
but nothing else may be missing, duplicated or out of order, late or not."""

from __future__ import annotations

import json

import pytest

from tests.integration.worker.chaos import PARTITIONS, Workload

TABLE = ("ks", "t")
PER_ROUND = 1000
LATE = range(PER_ROUND + 100, PER_ROUND + 200)  # round 1's second chunk landed late


def _workload() -> Workload:
    workload = Workload([TABLE], rounds=2, per_round=PER_ROUND)
    workload.late[TABLE].update(LATE)
    return workload


def _messages(skipped: frozenset[int] = frozenset(), doubled: frozenset[int] = frozenset()
              ) -> list[tuple[bytes | None, bytes | None]]:
    """The updates of both rounds in order, as the worker delivers them."""
    messages: list[tuple[bytes | None, bytes | None]] = []
    for value in range(2 * PER_ROUND):
        if value in skipped:
            continue
        i = value % PER_ROUND
        key = json.dumps({"pk": i % PARTITIONS, "ck": i // PARTITIONS}).encode()
        record = (key, json.dumps({"op": "u", "after": {"v": {"value": value}}}).encode())
        messages += [record, record] if value in doubled else [record]
    return messages


def test_every_update_delivered_passes() -> None:
    _workload().check(TABLE, _messages())


def test_late_updates_may_be_missing() -> None:
    _workload().check(TABLE, _messages(skipped=frozenset(LATE)))


@pytest.mark.parametrize("messages", [
    _messages(skipped=frozenset({PER_ROUND + 50})),  # an update of a chunk in time
    _messages(skipped=frozenset({150})),  # the earlier round's update of a row whose later one was late
    _messages(doubled=frozenset({PER_ROUND + 150})),  # a late update delivered twice
], ids=["in-time-missing", "earlier-round-missing", "late-doubled"])
def test_anything_else_fails(messages: list[tuple[bytes | None, bytes | None]]) -> None:
    with pytest.raises(AssertionError, match="1 of 1000 rows differ"):
        _workload().check(TABLE, messages)


def test_a_mostly_late_workload_fails() -> None:
    workload = _workload()
    workload.late[TABLE].update(range(PER_ROUND, 2 * PER_ROUND))
    with pytest.raises(AssertionError, match="landed later than the confidence window"):
        workload.check(TABLE, _messages(skipped=frozenset(range(PER_ROUND, 2 * PER_ROUND))))
