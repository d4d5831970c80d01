"""`cdc-bridge status`'s arithmetic: which groups are done, each table's lag, the catch-up ETA."""

from __future__ import annotations

from bridge.cli.ops import catch_up_text, group_lags, snapshot_lines, table_lags
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position, SnapshotProgress

OLD, NEW = 1_000_000, 1_600_000  # generation starts, ms


def test_a_vnode_group_is_done_once_it_reaches_the_next_generation_others_name() -> None:
    done = GroupId("ks", "t", OLD, "3")
    behind = GroupId("ks", "t", OLD, "4")
    successor = GroupId("ks", "t", NEW, "3")
    lags = group_lags({done: Position.at(NEW * 1000), behind: Position.at((NEW - 60_000) * 1000),
                       successor: Position.at((NEW + 10_000) * 1000)}, horizon_s=NEW / 1000 + 30)
    assert lags[done] is None
    assert lags[behind] == 90.0
    assert lags[successor] == 20.0
    assert table_lags(lags) == {"ks.t": 90.0}


def test_a_tablet_group_counts_as_reading_whatever_later_stream_sets_exist() -> None:
    stream = GroupId("ks", "t", OLD, "0x" + "1" * 32)
    newer = GroupId("ks", "t", NEW, "0x" + "2" * 32)
    lags = group_lags({stream: Position.at(NEW * 1000), newer: Position.at(NEW * 1000)}, horizon_s=NEW / 1000 + 5)
    assert lags == {stream: 5.0, newer: 5.0}


def test_catch_up_text_gives_rate_and_eta() -> None:
    heartbeat = 10_000
    assert catch_up_text(120.0, 100.0, 10.0, heartbeat) == ("lag 100.0 s (slowest group), reading 3.0x real time, "
                                                            "ETA 50 s")
    assert catch_up_text(100.0, 105.0, 5.0, heartbeat).endswith("not gaining (sampled over 5 s)")
    assert catch_up_text(9.0, 12.0, 5.0, heartbeat).endswith("keeping up")  # an idle group: one heartbeat behind
    assert catch_up_text(None, 70.0, 0.0, heartbeat) == "lag 70.0 s (slowest group)"


def test_status_tells_which_tables_are_being_snapshotted() -> None:
    positions = {
        GroupId("ks", "t", 1, "1"): Position(5, 5, None, SnapshotProgress("incremental", 42)),
        GroupId("ks", "t", 1, "2"): Position.at(5),
        GroupId("ks", "u", 1, "1"): Position(5, 5, None, SnapshotProgress("true", None, completed=True)),
    }
    assert snapshot_lines(positions) == {"ks.t": "snapshot (incremental) running in 1 of 2 groups"}
