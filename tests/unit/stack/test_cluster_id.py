"""KRaft cluster ids handed to Kafka's storage tool."""

from __future__ import annotations

import base64

import pytest

from bridge_devstack.stack.kafka_cluster import new_cluster_id

pytestmark = pytest.mark.unit


def test_cluster_ids_are_random_uuids_that_never_start_with_a_dash() -> None:
    """One plain base64url id in 64 starts with '-', which the storage tool's `-t` reads as an
    option (`expected one argument`): 2,000 draws would meet one about 31 times."""
    ids = [new_cluster_id() for _ in range(2000)]
    assert [i for i in ids if i.startswith("-")] == []
    assert len(set(ids)) == len(ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
