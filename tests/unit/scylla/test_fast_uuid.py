"""`uuid_from_bytes` builds exactly what `uuid.UUID(bytes=...)` builds, and the driver uses it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.scylla import fast_uuid

pytestmark = pytest.mark.unit


@given(st.binary(min_size=16, max_size=16))
def test_same_object_as_uuid_from_bytes(raw: bytes) -> None:
    made, expected = fast_uuid.uuid_from_bytes(bytes=raw), uuid.UUID(bytes=raw)
    assert made.__class__ is uuid.UUID
    assert (made, made.int, made.is_safe, str(made), hash(made)) == (
        expected, expected.int, expected.is_safe, str(expected), hash(expected))
    assert made.version == expected.version and made.time == expected.time


def test_other_calls_are_uuids_own() -> None:
    text = "0db02f50-e756-11f1-96a1-494243bbbbd9"
    assert fast_uuid.uuid_from_bytes(text) == uuid.UUID(text)
    assert fast_uuid.uuid_from_bytes(int=5) == uuid.UUID(int=5)
    with pytest.raises(ValueError, match="16"):
        fast_uuid.uuid_from_bytes(bytes=b"short")


def test_install_points_the_drivers_decoders_at_it() -> None:
    from cassandra import cqltypes

    fast_uuid.install()
    fast_uuid.install()  # idempotent
    assert cqltypes.UUID is fast_uuid.uuid_from_bytes
    raw = uuid.uuid1().bytes
    decoded = cqltypes.TimeUUIDType.deserialize(raw, 4)
    assert decoded == uuid.UUID(bytes=raw) and decoded.__class__ is uuid.UUID
