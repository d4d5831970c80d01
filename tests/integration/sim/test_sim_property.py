"""Property: after any sequence of writes through the emulator, the base table in Cassandra equals the
state rebuilt from the CDC log alone (deletes and post-images, in cdc$time order)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge_devstack.sim import Emulator, InvalidRequestError, canonical

TABLE = (
    "CREATE TABLE prop (pk int, ck int, s int static, v int, w text, m map<int, int>, st set<int>, l list<int>,"
    " u ut, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
)
VALUES = ("s", "v", "w", "m", "st", "l", "u")
REGULAR = ("v", "w", "m", "st", "l", "u")
_partitions = itertools.count(0, 10)


@pytest.fixture(scope="module", autouse=True)
def tables(emu: Emulator) -> None:
    emu.execute("CREATE TYPE ut (a int, b int)")
    emu.execute(TABLE)


small = s.integers(0, 5)
cks = s.integers(0, 3)
assignment = s.one_of(
    small.map(lambda x: f"v = {x}"),
    s.just("v = null"),
    s.sampled_from(["w = 'a'", "w = 'b'", "w = null"]),
    small.map(lambda x: f"s = {x}"),
    s.tuples(small, small).map(lambda kv: f"m = m + {{{kv[0]}: {kv[1]}}}"),
    small.map(lambda k: f"m[{k}] = null"),
    s.tuples(small, small).map(lambda kv: f"m = {{{kv[0]}: {kv[1]}}}"),
    small.map(lambda x: f"st = st + {{{x}}}"),
    small.map(lambda x: f"st = st - {{{x}}}"),
    small.map(lambda x: f"l = l + [{x}]"),
    small.map(lambda x: f"l = [{x}] + l"),
    small.map(lambda x: f"l = l - [{x}]"),
    s.tuples(s.integers(0, 2), small).map(lambda ix: f"l[{ix[0]}] = {ix[1]}"),
    small.map(lambda x: f"u.a = {x}"),
    s.tuples(small, small).map(lambda ab: f"u = {{a: {ab[0]}, b: {ab[1]}}}"),
    s.just("u.b = null"),
)


@s.composite
def statement(draw: Any, pk: int) -> str:
    kind = draw(s.sampled_from(["insert", "update", "update", "update", "row", "column", "partition", "range"]))
    ck = draw(cks)
    where = f"WHERE pk = {pk} AND ck = {ck}"
    if kind == "insert":
        return f"INSERT INTO prop (pk, ck, v, m, l) VALUES ({pk}, {ck}, {draw(small)}, {{1: {draw(small)}}}, [7])"
    if kind == "update":
        items = draw(
            s.lists(assignment, min_size=1, max_size=3, unique_by=lambda a: a.split()[0].split("[")[0].split(".")[0])
        )
        static_only = all(item.startswith("s =") for item in items)
        return f"UPDATE prop SET {', '.join(items)} {f'WHERE pk = {pk}' if static_only else where}"
    if kind == "row":
        return f"DELETE FROM prop {where}"
    if kind == "column":
        column = draw(s.sampled_from(["v", "m", "l", "u", "st", "s"]))
        return f"DELETE {column} FROM prop {f'WHERE pk = {pk}' if column == 's' else where}"
    if kind == "partition":
        return f"DELETE FROM prop WHERE pk = {pk}"
    low, high = sorted((draw(cks), draw(cks)))
    return f"DELETE FROM prop WHERE pk = {pk} AND ck >= {low} AND ck < {high + 1}"


def rebuilt_from_log(emu: Emulator, pks: set[int]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(static by pk, rows by (pk, ck)) replayed from deletes and post-images only."""
    names = ["cdc$time", "cdc$batch_seq_no", "cdc$operation", "pk", "ck", *VALUES]
    rows = [
        dict(zip(names, row, strict=True))
        for row in emu.session.execute(
            f"SELECT {', '.join(chr(34) + n + chr(34) for n in names)} FROM {emu.keyspace}.prop_scylla_cdc_log"
        )
    ]
    rows = sorted(
        (r for r in rows if r["pk"] in pks), key=lambda r: (timeuuid_sort_key(r["cdc$time"]), r["cdc$batch_seq_no"])
    )
    statics: dict[Any, Any] = {}
    clustered: dict[Any, Any] = {}
    starts: dict[Any, Any] = {}
    for row in rows:
        op, pk, ck = row["cdc$operation"], row["pk"], row["ck"]
        if op == 3:
            clustered.pop((pk, ck), None)
        elif op == 4:
            statics.pop(pk, None)
            clustered = {k: v for k, v in clustered.items() if k[0] != pk}
        elif op in (5, 6):
            starts[(pk, row["cdc$time"])] = (ck, op == 5)
        elif op in (7, 8):
            low, low_inclusive = starts[(pk, row["cdc$time"])]
            for key in [k for k in clustered if k[0] == pk]:
                above = low is None or key[1] > low or (low_inclusive and key[1] == low)
                below = ck is None or key[1] < ck or (op == 7 and key[1] == ck)
                if above and below:
                    del clustered[key]
        elif op == 9 and ck is None:
            statics[pk] = canonical(row["s"])
        elif op == 9:
            clustered[(pk, ck)] = {c: _list_values(c, canonical(row[c])) for c in REGULAR}
    return statics, clustered


def _list_values(column: str, value: Any) -> Any:
    """Post-images show lists as {timeuuid: value}; the base shows the values in key order."""
    if column != "l" or value is None:
        return value
    return tuple(value[k] for k in sorted(value, key=timeuuid_sort_key))


def base_state(emu: Emulator, pks: set[int]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    statics: dict[Any, Any] = {}
    clustered: dict[Any, Any] = {}
    for pk in pks:
        for row in emu.session.execute(
            f"SELECT ck, s, {', '.join(REGULAR)} FROM {emu.keyspace}.prop WHERE pk = %s", (pk,)
        ):
            if row.s is not None:
                statics[pk] = row.s
            if row.ck is not None:
                clustered[(pk, row.ck)] = {c: canonical(getattr(row, c)) for c in REGULAR}
    return statics, clustered


def _live(rows: dict[Any, Any]) -> dict[Any, Any]:
    """Rows with at least one value: a row of nulls exists in the base only through a row marker,
    which neither a post-image nor a SELECT can tell apart from an all-null post-image."""
    return {k: v for k, v in rows.items() if any(x is not None for x in v.values())}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=s.data())
def test_base_equals_state_rebuilt_from_post_images(emu: Emulator, data: s.DataObject) -> None:
    """Random writes (single statements and batches, two partitions) with increasing timestamps."""
    first = next(_partitions)
    pks = {first, first + 1}
    timestamp = time.time_ns() // 1000
    for _ in range(data.draw(s.integers(3, 14))):
        statements = [
            data.draw(statement(data.draw(s.sampled_from(sorted(pks))))) for _ in range(data.draw(s.integers(1, 2)))
        ]
        timestamp += 10
        if len(statements) == 1:
            cql = (
                statements[0].replace(" SET ", f" USING TIMESTAMP {timestamp} SET ", 1)
                if statements[0].startswith("UPDATE")
                else statements[0]
            )
            cql = (
                cql
                if statements[0].startswith("UPDATE")
                else f"BEGIN BATCH USING TIMESTAMP {timestamp} {cql}; APPLY BATCH"
            )
        else:
            cql = f"BEGIN UNLOGGED BATCH USING TIMESTAMP {timestamp} {'; '.join(statements)}; APPLY BATCH"
        try:
            emu.execute(cql)
        except InvalidRequestError as error:
            assert "List index" in str(error)  # l[i] on a shorter list: refused, as Cassandra and ScyllaDB do
    base_static, base_rows = base_state(emu, pks)
    log_static, log_rows = rebuilt_from_log(emu, pks)
    assert {k: v for k, v in log_static.items() if v is not None} == base_static
    assert _live(log_rows) == _live(base_rows)
