"""Vnode generation groups, tablet stream-set deltas, record assembly, image pairing, error map."""

from __future__ import annotations

import inspect

import cassandra
import cassandra.cluster
import cassandra.connection
import cassandra.pool
import cassandra.protocol
import cassandra.query
import cassandra.segment
import pytest

from bridge.scylla.errors import ErrorKind, MalformedLogError, classify
from bridge.scylla.model import ChangeRecord, Operation
from bridge.scylla.pairing import pair_images
from bridge.scylla.records import RecordAssembler
from bridge.scylla.stream_id import StreamId
from bridge.scylla.topology import Generation, StreamSetDelta, TabletTopology, VnodeRange, vnode_groups
from tests.unit.scylla.fakelog import record_rows


def vstream(token: int, index: int, rnd: int = 1) -> StreamId:
    return StreamId.build(token, rnd, index)


def test_vnode_generation_gives_one_group_per_vnode_with_predecessors_by_token_overlap() -> None:
    old = Generation(1000, (VnodeRange(0, (vstream(-5, 0), vstream(-3, 0))), VnodeRange(100, (vstream(50, 1),))))
    old_groups = vnode_groups("ks", "t", old)
    assert [g.id.vnode_id for g in old_groups] == ["0", "1"]
    assert len(old_groups[0].streams) == 2 and old_groups[0].start_us == 1_000_000
    new = Generation(2000, (VnodeRange(-50, (vstream(-60, 0),)), VnodeRange(50, (vstream(10, 1),)),
                            VnodeRange(100, (vstream(70, 2),))))
    new_groups = {g.id.vnode_id: g for g in vnode_groups("ks", "t", new, old_groups)}
    ids = {g.id.vnode_id: g.id for g in old_groups}
    # (-50, 50] overlaps old (100, 0] wrap and (0, 100]; (50, 100] only old vnode 1
    assert new_groups["1"].predecessors == {ids["0"], ids["1"]}
    assert new_groups["2"].predecessors == {ids["1"]}
    assert new_groups["0"].predecessors == {ids["0"]}  # the wrap-around range


def tstream(token: int, rnd: int) -> StreamId:
    return StreamId.build(token, rnd, 0)


def test_tablet_partial_change_keeps_unchanged_streams() -> None:
    a, b, c, d = tstream(-(2**62), 1), tstream(-1, 2), tstream(2**62, 3), tstream(2**63 - 1, 4)
    topology = TabletTopology("ks", "t")
    first = topology.load(1000, [a, b, c, d], {a: 900, b: 900, c: 900, d: 900})
    assert len(first.started) == 4 and first.started[0].id.generation_start_ms == 900
    # split tablet b into b1, b2 only
    b1, b2 = tstream(-(2**61), 5), tstream(-1, 6)
    change = topology.apply(StreamSetDelta(2000, frozenset({b}), frozenset({b1, b2})))
    b_group = next(g for g in first.started if g.streams == (b,))
    assert change.ended == {b_group.id: 2_000_000}
    assert {g.streams[0] for g in change.started} == {b1, b2}
    assert all(g.predecessors == {b_group.id} and g.start_us == 2_000_000 for g in change.started)
    assert {g.streams[0] for g in topology.groups} == {a, b1, b2, c, d}
    # merge c and d into one stream
    cd = tstream(2**63 - 1, 7)
    merged = topology.apply(StreamSetDelta(3000, frozenset({c, d}), frozenset({cd})))
    assert len(merged.ended) == 2 and merged.started[0].predecessors == set(merged.ended)
    assert topology.apply(StreamSetDelta(3000, frozenset(), frozenset())).started == ()


def test_assembler_holds_a_record_split_across_pages() -> None:
    stream = vstream(1, 1)
    rows = record_rows(stream, 10, 3) + record_rows(stream, 11, 1)
    assembler = RecordAssembler("ks", "t")
    assert assembler.add(rows[:2]) == []
    done = assembler.add(rows[2:])
    assert [len(r.rows) for r in done] == [3, 1]
    assembler.finish()


def test_assembler_rejects_a_record_without_end_of_batch() -> None:
    stream = vstream(1, 1)
    rows = record_rows(stream, 10, 2)
    assembler = RecordAssembler("ks", "t")
    assembler.add(rows[:1])
    with pytest.raises(MalformedLogError, match="end_of_batch at the end"):
        assembler.finish()
    assembler = RecordAssembler("ks", "t")
    with pytest.raises(MalformedLogError, match="before the next one"):
        assembler.add(rows[:1] + record_rows(stream, 11, 1))


def test_pair_images_by_primary_key() -> None:
    stream = vstream(1, 1)
    ops = [Operation.PRE_IMAGE, Operation.PRE_IMAGE, Operation.UPDATE, Operation.UPDATE, Operation.POST_IMAGE]
    rows = record_rows(stream, 10, 5, ops)
    keyed = [r.__class__(**{**{s: getattr(r, s) for s in r.__slots__}, "values": {"pk": 1, "ck": ck}})
             for r, ck in zip(rows, [1, 2, 2, 1, 1], strict=True)]
    changes = pair_images(ChangeRecord("ks", "t", tuple(keyed)), ["pk", "ck"])
    by_key = {c.key: c for c in changes}
    assert by_key[(1, 1)].pre_image is keyed[0] and by_key[(1, 1)].post_image is keyed[4]
    assert by_key[(1, 1)].deltas == (keyed[3],)
    assert by_key[(1, 2)].pre_image is keyed[1] and by_key[(1, 2)].post_image is None


def _driver_exceptions() -> list[type[BaseException]]:
    found = []
    modules = (cassandra, cassandra.cluster, cassandra.connection, cassandra.protocol, cassandra.pool,
               cassandra.query, cassandra.segment)
    for module in modules:
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Exception) and value.__module__.startswith("cassandra"):
                found.append(value)
    return found


def test_every_driver_exception_is_classified_explicitly() -> None:
    from bridge.scylla.errors import _KIND_BY_CLASS

    mapped = tuple(cls for cls, _ in _KIND_BY_CLASS)
    unmapped = [cls.__name__ for cls in _driver_exceptions() if not issubclass(cls, mapped)]
    assert unmapped == []


def test_classification_examples() -> None:
    from cassandra import InvalidRequest, OperationTimedOut, Unauthorized
    from cassandra.cluster import NoHostAvailable
    from cassandra.protocol import OverloadedErrorMessage

    assert classify(OperationTimedOut()) is ErrorKind.TRANSIENT
    assert classify(OverloadedErrorMessage(None, "overloaded", None)) is ErrorKind.TRANSIENT
    assert classify(InvalidRequest("unconfigured table x_scylla_cdc_log")) is ErrorKind.TABLE_MISSING
    assert classify(Unauthorized("no")) is ErrorKind.FATAL
    assert classify(NoHostAvailable("x", {"h": ConnectionRefusedError()})) is ErrorKind.TRANSIENT
    assert classify(NoHostAvailable("x", {"h": cassandra.AuthenticationFailed("bad")})) is ErrorKind.FATAL
    assert classify(ValueError("bug")) is ErrorKind.FATAL
