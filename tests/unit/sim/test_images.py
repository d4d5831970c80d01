"""Pre- and post-image rows (cdc-log-format.md section 4), without Cassandra."""

from __future__ import annotations

from typing import Any

from tests.unit.sim.pure import T, World, rows

K = {"pk": 0, "ck": 0}
Rows = list[tuple[int, int | None, dict[str, Any]]]


def world_with(options: str, columns: str = "v1 int, v2 map<int,int>", extra: str = "") -> World:
    w = World()
    w.add(f"CREATE TABLE t (pk int, ck int, {columns}, PRIMARY KEY (pk, ck)) WITH cdc = {{{options}}}")
    if extra:
        w.add(extra)
    return w


def record(world: World, cql: str, timestamp: int = T) -> Rows:
    (only,) = world.write(cql, timestamp)
    return rows(only)


def test_preimage_true_shows_only_touched_columns() -> None:
    """`preimage: true`: the pre-image carries the touched columns; null ones get cdc$deleted_X."""
    w = world_with("'enabled':true,'preimage':true")
    assert record(w, "UPDATE t SET v1=0 WHERE pk=0 AND ck=0", T + 1) == [(1, None, {**K, "v1": 0})]
    assert record(w, "UPDATE t SET v2=v2+{1:1,2:2} WHERE pk=0 AND ck=0", T + 2) == [
        (0, None, {**K, "cdc$deleted_v2": True}),
        (1, None, {**K, "v2": {1: 1, 2: 2}}),
    ]
    assert record(w, "UPDATE t SET v2=v2+{2:3,3:4} WHERE pk=0 AND ck=0", T + 3) == [
        (0, None, {**K, "v2": {1: 1, 2: 2}}),
        (1, None, {**K, "v2": {2: 3, 3: 4}}),
    ]


def test_preimage_full_shows_every_column() -> None:
    """`preimage: 'full'`: the same writes, pre-images carry v1 too."""
    w = world_with("'enabled':true,'preimage':'full'")
    record(w, "UPDATE t SET v1=0 WHERE pk=0 AND ck=0", T + 1)
    assert record(w, "UPDATE t SET v2=v2+{1:1,2:2} WHERE pk=0 AND ck=0", T + 2)[0] == (
        0,
        None,
        {**K, "v1": 0, "cdc$deleted_v2": True},
    )


def test_full_pre_and_post_images() -> None:
    """The section 4.4 sequence with `preimage: 'full', postimage: true`."""
    w = world_with("'enabled':true,'preimage':'full','postimage':true", "v1 int, v2 int")
    assert record(w, "UPDATE t SET v1=0 WHERE pk=0 AND ck=0", T + 1) == [
        (1, None, {**K, "v1": 0}),
        (9, None, {**K, "v1": 0}),
    ]
    assert record(w, "INSERT INTO t (pk,ck,v2) VALUES (0,0,0)", T + 2) == [
        (0, None, {**K, "v1": 0, "cdc$deleted_v2": True}),
        (2, None, {**K, "v2": 0}),
        (9, None, {**K, "v1": 0, "v2": 0}),
    ]
    assert record(w, "DELETE FROM t WHERE pk=0 AND ck=0", T + 3) == [
        (0, None, {**K, "v1": 0, "v2": 0}),
        (3, None, K),
    ]
    assert record(w, "DELETE FROM t WHERE pk=0 AND ck>=1 AND ck<2", T + 4) == [
        (5, None, {"pk": 0, "ck": 1}),
        (8, None, {"pk": 0, "ck": 2}),
    ]
    assert record(w, "DELETE FROM t WHERE pk=0", T + 5) == [(4, None, {"pk": 0})]


def test_map_with_pre_and_post_images() -> None:
    """Map overwrite then add+remove: post-image = pre-image with the delta applied."""
    w = world_with("'enabled':true,'preimage':true,'postimage':true", "v map<int,int>")
    assert record(w, "UPDATE t SET v={1:1,2:2} WHERE pk=0 AND ck=0", T + 1) == [
        (1, None, {**K, "v": {1: 1, 2: 2}, "cdc$deleted_v": True}),
        (9, None, {**K, "v": {1: 1, 2: 2}}),
    ]
    assert record(w, "UPDATE t SET v=v+{3:3}, v=v-{2} WHERE pk=0 AND ck=0", T + 2) == [
        (0, None, {**K, "v": {1: 1, 2: 2}}),
        (1, None, {**K, "v": {3: 3}, "cdc$deleted_elements_v": {2}}),
        (9, None, {**K, "v": {1: 1, 3: 3}}),
    ]


def test_delta_keys_with_images() -> None:
    """`delta: 'keys'`: the delta row has keys, op and TTL only; the post-image has the values."""
    w = world_with("'enabled':true,'preimage':true,'postimage':true,'delta':'keys'", "i1 int")
    assert record(w, "INSERT INTO t (pk,ck,i1) VALUES (2,22,222) USING TTL 2222") == [
        (2, 2222, {"pk": 2, "ck": 22}),
        (9, None, {"pk": 2, "ck": 22, "i1": 222}),
    ]


def test_batch_images_of_two_rows() -> None:
    """Batch updating two existing rows: pre, pre, delta, delta, post, post."""
    w = world_with("'enabled':true,'preimage':true,'postimage':true", "v1 int, v2 int")
    w.write("INSERT INTO t (pk,ck,v1,v2) VALUES (0,1,10,null)", T)
    w.write("INSERT INTO t (pk,ck,v1) VALUES (0,2,20)", T)
    got = record(
        w,
        "BEGIN UNLOGGED BATCH UPDATE t SET v1=11 WHERE pk=0 AND ck=1; UPDATE t SET v2=22 WHERE pk=0 AND ck=2;"
        " APPLY BATCH",
        T + 1,
    )
    k1, k2 = {"pk": 0, "ck": 1}, {"pk": 0, "ck": 2}
    assert got == [
        (0, None, {**k1, "v1": 10}),
        (0, None, {**k2, "cdc$deleted_v2": True}),
        (1, None, {**k1, "v1": 11}),
        (1, None, {**k2, "v2": 22}),
        (9, None, {**k1, "v1": 11}),
        (9, None, {**k2, "v1": 20, "v2": 22}),
    ]


def test_range_delete_in_a_batch_suppresses_post_images_of_covered_rows() -> None:
    """INSERT ck=1 + DELETE ck in [2,3]: post-image of ck=1; with the range covering ck=1, none."""
    w = world_with("'enabled':true,'postimage':true", "v int")
    assert record(
        w,
        "BEGIN UNLOGGED BATCH INSERT INTO t (pk,ck,v) VALUES (0,1,100); DELETE FROM t WHERE pk=0 AND ck>=2 AND ck<=3;"
        " APPLY BATCH",
    ) == [
        (2, None, {"pk": 0, "ck": 1, "v": 100}),
        (5, None, {"pk": 0, "ck": 2}),
        (7, None, {"pk": 0, "ck": 3}),
        (9, None, {"pk": 0, "ck": 1, "v": 100}),
    ]
    assert record(
        w,
        "BEGIN UNLOGGED BATCH INSERT INTO t (pk,ck,v) VALUES (1,1,100); DELETE FROM t WHERE pk=1 AND ck>=0 AND ck<=3;"
        " APPLY BATCH",
    ) == [(2, None, {"pk": 1, "ck": 1, "v": 100}), (5, None, {"pk": 1, "ck": 0}), (7, None, {"pk": 1, "ck": 3})]


def test_static_and_clustered_images() -> None:
    """Static image first, then clustered; without the clustered row only the static row has a pre-image."""
    w = world_with("'enabled':true,'preimage':true", "vs int static, vc int")
    w.write("UPDATE t SET vs=2, vc=2 WHERE pk=0 AND ck=0", T)
    assert record(w, "UPDATE t SET vs=3, vc=3 WHERE pk=0 AND ck=0", T + 1) == [
        (0, None, {"pk": 0, "vs": 2}),
        (0, None, {**K, "vc": 2}),
        (1, None, {"pk": 0, "vs": 3}),
        (1, None, {**K, "vc": 3}),
    ]
    assert record(w, "UPDATE t SET vs=4, vc=4 WHERE pk=0 AND ck=5", T + 2) == [
        (0, None, {"pk": 0, "vs": 3}),
        (1, None, {"pk": 0, "vs": 4}),
        (1, None, {"pk": 0, "ck": 5, "vc": 4}),
    ]


def test_no_preimage_of_missing_row_and_row_delete_images_all_columns() -> None:
    """A write to a missing row has no pre-image; a row delete's pre-image covers every column."""
    w = world_with("'enabled':true,'preimage':true,'postimage':true", "v1 int, v2 int")
    assert record(w, "UPDATE t SET v1=1 WHERE pk=0 AND ck=0", T) == [
        (1, None, {**K, "v1": 1}),
        (9, None, {**K, "v1": 1}),
    ]
    assert record(w, "DELETE FROM t WHERE pk=0 AND ck=0", T + 1) == [
        (0, None, {**K, "v1": 1, "cdc$deleted_v2": True}),
        (3, None, K),
    ]


def test_partition_delete_without_clustering_key_has_a_preimage() -> None:
    """A partition delete of a table without ck shows the deleted row as pre-image (fix #26382)."""
    w = World()
    w.add("CREATE TABLE p (pk int PRIMARY KEY, v int) WITH cdc = {'enabled':true,'preimage':true}")
    w.write("INSERT INTO p (pk,v) VALUES (0,5)", T)
    assert record(w, "DELETE FROM p WHERE pk=0", T + 1) == [(0, None, {"pk": 0, "v": 5}), (4, None, {"pk": 0})]


def test_state_carries_across_records_of_a_batch() -> None:
    """Two timestamps in one batch: the second record's pre-image shows the first's write."""
    w = world_with("'enabled':true,'preimage':'full'", "v1 int, v2 int")
    records = w.write(
        f"BEGIN UNLOGGED BATCH UPDATE t USING TIMESTAMP {T} SET v1=1 WHERE pk=0 AND ck=0;"
        f" UPDATE t USING TIMESTAMP {T + 1} SET v2=2 WHERE pk=0 AND ck=0; APPLY BATCH"
    )
    assert [rows(r) for r in records] == [
        [(1, None, {**K, "v1": 1})],
        [(0, None, {**K, "v1": 1, "cdc$deleted_v2": True}), (1, None, {**K, "v2": 2})],
    ]


def test_keys_only_insert_gets_a_post_image() -> None:
    """A keys-only INSERT of a new row still gets a post-image (fix #7716)."""
    w = world_with("'enabled':true,'postimage':true", "v int")
    assert record(w, "INSERT INTO t (pk,ck) VALUES (0,0)") == [(2, None, K), (9, None, K)]
