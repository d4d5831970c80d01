"""Golden tests for pre-images and post-images (cdc-log-format.md section 4): `before` from the
pre-image with `experimental.preimages.enabled`, `after` from the post-image with
`experimental.postimages.enabled`, images paired with their delta row by primary key."""

from __future__ import annotations

from typing import Any

from cassandra.util import OrderedMap, SortedSet

from bridge.envelope.records import Translation
from bridge.scylla.model import Operation
from tests.unit.envelope.support import Wire, d, de, make_table, plan_for, row, row_with, run

TABLE = make_table(
    partition=[("pk", "int")],
    clustering=[("ck", "int")],
    static=[("vs", "int")],
    regular=[("v1", "int"), ("v2", "int")],
)
BOTH = plan_for(TABLE, experimental_preimages_enabled=True, experimental_postimages_enabled=True)
NONE = plan_for(TABLE)
NULLS = {"ck": 0, "pk": 0, "v1": None, "v2": None, "vs": None}


def values(translation: Translation) -> list[Any]:
    return Wire().values(translation)


def test_images_are_ignored_unless_enabled() -> None:
    """Without the settings, image rows give no event and do not fill before/after."""
    out = values(
        run(
            NONE,
            row(Operation.PRE_IMAGE, pk=0, ck=0, v1=10),
            row(Operation.UPDATE, pk=0, ck=0, v1=11),
            row(Operation.POST_IMAGE, pk=0, ck=0, v1=11, v2=5),
        )
    )
    assert [(v["op"], v["before"], v["after"]) for v in out] == [("u", None, {**NULLS, "v1": {"value": 11}})]


def test_changed_columns_pre_image_and_full_post_image() -> None:
    """preimage true + postimage: before has the columns the write touched (others null), after
    is the whole clustered row, every regular column a cell (the static column belongs to the
    static row's image, so it stays null)."""
    out = values(
        run(
            BOTH,
            row(Operation.PRE_IMAGE, pk=0, ck=0, v1=10),
            row(Operation.UPDATE, pk=0, ck=0, v1=11),
            row(Operation.POST_IMAGE, pk=0, ck=0, v1=11, v2=5),
        )
    )
    [event] = out
    assert event["before"] == {**NULLS, "v1": {"value": 10}}
    assert event["after"] == {**NULLS, "v1": {"value": 11}, "v2": {"value": 5}}


def test_pre_image_marks_null_columns_it_includes() -> None:
    """A pre-image column that was null has cdc$deleted_X = true: {"value": null}, distinct
    from a column the image leaves out (null)."""
    out = values(
        run(
            BOTH,
            row_with(Operation.PRE_IMAGE, {"pk": 0, "ck": 0, "v1": 0, d("v2"): True}),
            row(Operation.INSERT, pk=0, ck=0, v2=0),
        )
    )
    assert out[0]["before"] == {**NULLS, "v1": {"value": 0}, "v2": {"value": None}}
    assert out[0]["op"] == "c"


def test_preimage_only_keeps_the_delta_after() -> None:
    plan = plan_for(TABLE, experimental_preimages_enabled=True)
    out = values(
        run(
            plan,
            row(Operation.PRE_IMAGE, pk=0, ck=0, v1=10),
            row(Operation.UPDATE, pk=0, ck=0, v1=11),
            row(Operation.POST_IMAGE, pk=0, ck=0, v1=11, v2=5),
        )
    )
    assert out[0]["before"] == {**NULLS, "v1": {"value": 10}}
    assert out[0]["after"] == {**NULLS, "v1": {"value": 11}}


def test_row_delete_takes_its_pre_image_as_before() -> None:
    """DELETE ... WHERE pk=0 AND ck=0 with pre-images: before = the image, after null, tombstone."""
    out = values(run(BOTH, row(Operation.PRE_IMAGE, pk=0, ck=0, v1=0, v2=0), row(Operation.ROW_DELETE, pk=0, ck=0)))
    assert out[0]["op"] == "d" and out[0]["after"] is None
    assert out[0]["before"] == {**NULLS, "v1": {"value": 0}, "v2": {"value": 0}}
    assert out[1] is None


def test_partition_delete_of_pk_only_table_takes_its_pre_image() -> None:
    table = make_table(partition=[("pk", "int")], regular=[("v", "int")])
    plan = plan_for(table, experimental_preimages_enabled=True)
    out = values(run(plan, row(Operation.PRE_IMAGE, pk=0, v=3), row(Operation.PARTITION_DELETE, pk=0)))
    assert (out[0]["op"], out[0]["before"], out[1]) == ("d", {"pk": 0, "v": {"value": 3}}, None)


def test_static_and_clustered_images_pair_by_key() -> None:
    """UPDATE SET vs=3, vc=3: pre(static), pre(ck 0), delta(static), delta(ck 0) - each delta
    gets the image of its own row (the static one has ck null)."""
    out = values(
        run(
            BOTH,
            row(Operation.PRE_IMAGE, pk=0, vs=2),
            row(Operation.PRE_IMAGE, pk=0, ck=0, v1=2),
            row(Operation.UPDATE, pk=0, vs=3),
            row(Operation.UPDATE, pk=0, ck=0, v1=3),
            row(Operation.POST_IMAGE, pk=0, vs=3),
            row(Operation.POST_IMAGE, pk=0, ck=0, v1=3),
        )
    )
    static, clustered = out
    assert static["before"] == {**NULLS, "ck": None, "vs": {"value": 2}}
    # the static row's post-image covers static columns only: regular ones stay null
    assert static["after"] == {**NULLS, "ck": None, "vs": {"value": 3}}
    assert clustered["before"] == {**NULLS, "v1": {"value": 2}}
    assert clustered["after"]["v1"] == {"value": 3}


def test_batch_images_follow_their_rows_not_their_position() -> None:
    """BATCH UPDATE ck=1; UPDATE ck=2: Scylla groups rows by type (PRE, PRE, UPD, UPD, POST,
    POST); each event must carry its own row's images (the connector's PR #266 regression)."""
    out = values(
        run(
            BOTH,
            row(Operation.PRE_IMAGE, pk=0, ck=1, v1=10),
            row_with(Operation.PRE_IMAGE, {"pk": 0, "ck": 2, d("v2"): True}),
            row(Operation.UPDATE, pk=0, ck=1, v1=11),
            row(Operation.UPDATE, pk=0, ck=2, v2=22),
            row(Operation.POST_IMAGE, pk=0, ck=1, v1=11),
            row(Operation.POST_IMAGE, pk=0, ck=2, v2=22),
        )
    )
    assert [(v["before"]["ck"], v["after"]["ck"]) for v in out] == [(1, 1), (2, 2)]
    assert out[0]["before"]["v1"] == {"value": 10}
    assert out[1]["before"]["v2"] == {"value": None}
    assert out[1]["after"]["v2"] == {"value": 22}


def test_two_deltas_of_one_row_share_images_first_and_last() -> None:
    """INSERT with a TTL and a null gives two deltas of one row: the pre-image goes to the first,
    the post-image (state after the whole record) to the last."""
    out = values(
        run(
            BOTH,
            row(Operation.PRE_IMAGE, pk=0, ck=0, v1=1),
            row(Operation.INSERT, ttl=10, pk=0, ck=0, v1=2),
            row_with(Operation.UPDATE, {"pk": 0, "ck": 0, d("v2"): True}),
            row(Operation.POST_IMAGE, pk=0, ck=0, v1=2),
        )
    )
    first, second = out
    assert first["before"]["v1"] == {"value": 1} and first["after"]["v1"] == {"value": 2}
    assert first["after"]["vs"] is None  # delta-based: untouched stays null
    assert second["before"] is None
    assert second["after"] == {**NULLS, "v1": {"value": 2}, "v2": {"value": None}}


def test_delta_keys_with_post_image() -> None:
    """delta: 'keys' + post-image: INSERT ... (2, 22, 222) USING TTL 2222 on a new row gives a
    keys-only delta and a post-image with the value."""
    table = make_table(partition=[("pk", "int")], clustering=[("ck", "int")], regular=[("i1", "int")])
    plan = plan_for(table, experimental_postimages_enabled=True)
    out = values(
        run(plan, row(Operation.INSERT, ttl=2222, pk=2, ck=22), row(Operation.POST_IMAGE, pk=2, ck=22, i1=222))
    )
    assert out[0]["op"] == "c"
    assert out[0]["after"] == {"ck": 22, "i1": {"value": 222}, "pk": 2}


def test_collection_images_are_full_values() -> None:
    """Map with pre and post images: SET v = v + {3:3}, v = v - {2}: pre {1:1, 2:2}, delta
    elements, post {1:1, 3:3}."""
    table = make_table(partition=[("pk", "int")], clustering=[("ck", "int")], regular=[("v", "map<int, int>")])
    plan = plan_for(table, experimental_preimages_enabled=True, experimental_postimages_enabled=True)
    out = values(
        run(
            plan,
            row(Operation.PRE_IMAGE, pk=0, ck=0, v=OrderedMap([(1, 1), (2, 2)])),
            row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "v": OrderedMap([(3, 3)]), de("v"): SortedSet([2])}),
            row(Operation.POST_IMAGE, pk=0, ck=0, v=OrderedMap([(1, 1), (3, 3)])),
        )
    )
    [event] = out
    assert event["before"]["v"] == {"value": [{"key": 1, "value": 1}, {"key": 2, "value": 2}]}
    assert event["before"]["v__elements"] is None
    assert event["after"]["v"] == {"value": [{"key": 1, "value": 1}, {"key": 3, "value": 3}]}
    assert event["after"]["v__elements"] is None
    without_post = plan_for(table, experimental_preimages_enabled=True)
    [delta] = values(
        run(
            without_post,
            row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "v": OrderedMap([(3, 3)]), de("v"): SortedSet([2])}),
        )
    )
    assert delta["after"]["v"] is None
    assert delta["after"]["v__elements"] == {"added": [{"key": 3, "value": 3}], "removed": [2]}


def test_the_one_row_shortcut_pairs_as_the_pairing_by_key_does() -> None:
    """A record of one delta row and its images takes a shortcut past `pair_images`
    (`record_walk._one_row_images`); every such shape, with images of the row or of another row
    (the static row, another clustering key), pairs exactly as the general rule pairs them."""
    from itertools import product

    from bridge.envelope.record_walk import _one_row_images, paired_images
    from bridge.scylla.model import ChangeRecord

    deltas = [Operation.INSERT, Operation.UPDATE, Operation.ROW_DELETE]
    image_keys: list[dict[str, Any] | None] = [None, {"pk": 0, "ck": 0}, {"pk": 0, "ck": 1}, {"pk": 0, "ck": None}]
    for op, pre_key, post_key in product(deltas, image_keys, image_keys):
        rows = []
        if pre_key is not None:
            rows.append(row(Operation.PRE_IMAGE, **pre_key, v1=1))
        rows.append(row(op, pk=0, ck=0, v1=2))
        if post_key is not None:
            rows.append(row(Operation.POST_IMAGE, **post_key, v1=2))
        record = ChangeRecord("ks", "t", tuple(rows))
        shortcut = _one_row_images(record.rows, BOTH.key_names, True, True)
        if shortcut is None:
            assert pre_key not in (None, {"pk": 0, "ck": 0}) or post_key not in (None, {"pk": 0, "ck": 0})
            continue
        pairing = paired_images(record, BOTH.key_names, True, True)
        assert shortcut == pairing, (op, pre_key, post_key)
