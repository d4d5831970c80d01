"""Section 4 of the reference against real Cassandra: pre-images read the base row before the
write, post-images, 'full' vs true, delta 'keys' (checklist items 8 and 9)."""

from __future__ import annotations

import pytest

from bridge_devstack.sim import Emulator
from tests.integration.sim.logkit import check_records

K = {"pk": 0, "ck": 0}


@pytest.fixture(scope="module", autouse=True)
def tables(emu: Emulator) -> None:
    emu.execute_script(
        """
        CREATE TABLE pre (pk int, ck int, v1 int, v2 map<int,int>, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': true};
        CREATE TABLE prefull (pk int, ck int, v1 int, v2 map<int,int>, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': 'full'};
        CREATE TABLE both (pk int, ck int, v1 int, v2 int, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true};
        CREATE TABLE maps (pk int, ck int, v map<int,int>, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true};
        CREATE TABLE keys (pk int, ck int, i1 int, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true, 'delta': 'keys'};
        CREATE TABLE st (pk int, ck int, vs int static, vc int, l list<int>, PRIMARY KEY (pk, ck))
            WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true};
        """
    )


def test_preimage_true_and_full(emu: Emulator) -> None:
    """The doc sequence: only touched columns with `true`, every column with 'full'."""
    for table, full in (("pre", False), ("prefull", True)):
        check_records(emu, emu.execute(f"UPDATE {table} SET v1=0 WHERE pk=0 AND ck=0"), [[(1, None, {**K, "v1": 0})]])
        extra = {"v1": 0} if full else {}
        check_records(
            emu,
            emu.execute(f"UPDATE {table} SET v2=v2+{{1:1,2:2}} WHERE pk=0 AND ck=0"),
            [[(0, None, {**K, **extra, "cdc$deleted_v2": True}), (1, None, {**K, "v2": {1: 1, 2: 2}})]],
        )
        check_records(
            emu,
            emu.execute(f"UPDATE {table} SET v2=v2+{{2:3,3:4}} WHERE pk=0 AND ck=0"),
            [[(0, None, {**K, **extra, "v2": {1: 1, 2: 2}}), (1, None, {**K, "v2": {2: 3, 3: 4}})]],
        )


def test_full_pre_and_post_images(emu: Emulator) -> None:
    """The doc sequence with preimage 'full' and postimage: placement, deletes without images."""
    steps = [
        ("UPDATE both SET v1=0 WHERE pk=0 AND ck=0", [(1, None, {**K, "v1": 0}), (9, None, {**K, "v1": 0})]),
        (
            "INSERT INTO both (pk,ck,v2) VALUES (0,0,0)",
            [
                (0, None, {**K, "v1": 0, "cdc$deleted_v2": True}),
                (2, None, {**K, "v2": 0}),
                (9, None, {**K, "v1": 0, "v2": 0}),
            ],
        ),
        ("DELETE FROM both WHERE pk=0 AND ck=0", [(0, None, {**K, "v1": 0, "v2": 0}), (3, None, K)]),
        (
            "DELETE FROM both WHERE pk=0 AND ck>=1 AND ck<2",
            [(5, None, {"pk": 0, "ck": 1}), (8, None, {"pk": 0, "ck": 2})],
        ),
        ("DELETE FROM both WHERE pk=0", [(4, None, {"pk": 0})]),
    ]
    for cql, rows in steps:
        check_records(emu, emu.execute(cql), [rows])


def test_map_pre_and_post_images(emu: Emulator) -> None:
    """Map overwrite, then add and remove: post-image is the pre-image with the delta applied."""
    check_records(
        emu,
        emu.execute("UPDATE maps SET v={1:1,2:2} WHERE pk=0 AND ck=0"),
        [[(1, None, {**K, "v": {1: 1, 2: 2}, "cdc$deleted_v": True}), (9, None, {**K, "v": {1: 1, 2: 2}})]],
    )
    check_records(
        emu,
        emu.execute("UPDATE maps SET v=v+{3:3}, v=v-{2} WHERE pk=0 AND ck=0"),
        [
            [
                (0, None, {**K, "v": {1: 1, 2: 2}}),
                (1, None, {**K, "v": {3: 3}, "cdc$deleted_elements_v": {2}}),
                (9, None, {**K, "v": {1: 1, 3: 3}}),
            ]
        ],
    )


def test_delta_keys(emu: Emulator) -> None:
    """delta 'keys': the delta row has keys, op and ttl only; images still carry the values."""
    check_records(
        emu,
        emu.execute("INSERT INTO keys (pk,ck,i1) VALUES (2,22,222) USING TTL 2222"),
        [[(2, 2222, {"pk": 2, "ck": 22}), (9, None, {"pk": 2, "ck": 22, "i1": 222})]],
    )
    check_records(
        emu,
        emu.execute("UPDATE keys SET i1=3 WHERE pk=2 AND ck=22"),
        [
            [
                (0, None, {"pk": 2, "ck": 22, "i1": 222}),
                (1, None, {"pk": 2, "ck": 22}),
                (9, None, {"pk": 2, "ck": 22, "i1": 3}),
            ]
        ],
    )


def test_batch_images_and_range_delete(emu: Emulator) -> None:
    """Batch of two existing rows: pre, pre, delta, delta, post, post; a range delete in the same
    record removes the post-image of the rows it covers."""
    emu.execute("INSERT INTO both (pk,ck,v1) VALUES (5,1,10)")
    emu.execute("INSERT INTO both (pk,ck,v1) VALUES (5,2,20)")
    k1, k2 = {"pk": 5, "ck": 1}, {"pk": 5, "ck": 2}
    check_records(
        emu,
        emu.execute(
            "BEGIN UNLOGGED BATCH UPDATE both SET v1=11 WHERE pk=5 AND ck=1; UPDATE both SET v2=22 WHERE pk=5 AND ck=2;"
            " APPLY BATCH"
        ),
        [
            [
                (0, None, {**k1, "v1": 10, "cdc$deleted_v2": True}),
                (0, None, {**k2, "v1": 20, "cdc$deleted_v2": True}),
                (1, None, {**k1, "v1": 11}),
                (1, None, {**k2, "v2": 22}),
                (9, None, {**k1, "v1": 11}),
                (9, None, {**k2, "v1": 20, "v2": 22}),
            ]
        ],
    )
    check_records(
        emu,
        emu.execute(
            "BEGIN UNLOGGED BATCH INSERT INTO both (pk,ck,v1) VALUES (6,1,100); DELETE FROM both WHERE pk=6 AND ck>=2"
            " AND ck<=3; APPLY BATCH"
        ),
        [
            [
                (2, None, {"pk": 6, "ck": 1, "v1": 100}),
                (5, None, {"pk": 6, "ck": 2}),
                (7, None, {"pk": 6, "ck": 3}),
                (9, None, {"pk": 6, "ck": 1, "v1": 100}),
            ]
        ],
    )


def test_static_row_images_and_lists(emu: Emulator) -> None:
    """Static image first, then the clustered one; lists show their keys in images too."""
    emu.execute("UPDATE st SET vs=2, vc=2 WHERE pk=0 AND ck=0")
    check_records(
        emu,
        emu.execute("UPDATE st SET vs=3, vc=3 WHERE pk=0 AND ck=0"),
        [
            [
                (0, None, {"pk": 0, "vs": 2}),
                (0, None, {**K, "vc": 2}),
                (1, None, {"pk": 0, "vs": 3}),
                (1, None, {**K, "vc": 3}),
                (9, None, {"pk": 0, "vs": 3}),
                (9, None, {**K, "vc": 3}),
            ]
        ],
    )
    (appended,) = emu.execute("UPDATE st SET l = l + [7, 8] WHERE pk=0 AND ck=0")
    keys = appended.rows[1].values["l"]  # rows: pre-image, delta, post-image
    (overwritten,) = emu.execute("UPDATE st SET l = [9] WHERE pk=0 AND ck=0")
    new = overwritten.rows[1].values["l"]
    check_records(
        emu,
        [overwritten],
        [
            [
                (0, None, {**K, "l": keys}),
                (1, None, {**K, "l": new, "cdc$deleted_l": True}),
                (9, None, {**K, "vc": 3, "l": new}),
            ]
        ],
    )


def test_partition_delete_preimage_and_keys_only_postimage(emu: Emulator) -> None:
    """A table without ck: its partition delete shows the row as pre-image (fix #26382); a keys-only
    INSERT of a new row gets a post-image (fix #7716)."""
    emu.execute(
        "CREATE TABLE single (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'preimage': true,"
        " 'postimage': true}"
    )
    check_records(
        emu, emu.execute("INSERT INTO single (pk) VALUES (1)"), [[(2, None, {"pk": 1}), (9, None, {"pk": 1})]]
    )
    emu.execute("UPDATE single SET v = 5 WHERE pk = 1")
    check_records(
        emu, emu.execute("DELETE FROM single WHERE pk = 1"), [[(0, None, {"pk": 1, "v": 5}), (4, None, {"pk": 1})]]
    )
