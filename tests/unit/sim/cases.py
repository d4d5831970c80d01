"""Statements of cdc-log-format.md sections 3.2 and 3.3 with the exact rows each must log; shared by
the pure unit tests and the integration tests against Cassandra."""

from __future__ import annotations

from typing import Any

Rows = list[tuple[int, int | None, dict[str, Any]]]

BASE = (
    "CREATE TABLE t (pk int, ck int, s int static, v1 int, v2 int, m map<int,int>, PRIMARY KEY (pk, ck))"
    " WITH cdc = {'enabled': true}"
)
COLLECTIONS = (
    "CREATE TABLE c (pk int, ck int, m map<int,text>, st set<int>, l list<int>, u ut, fm frozen<map<int,int>>,"
    " PRIMARY KEY (pk,ck)) WITH cdc = {'enabled': true}"
)
UT_CQL = "CREATE TYPE ut (a int, b int, c int)"
K = {"pk": 0, "ck": 0}

# (statement, rows of its single record as (op, ttl, non-null values)) on table `t`.
BASIC_CASES: list[tuple[str, Rows]] = [
    ("INSERT INTO t (pk,ck,v1) VALUES (0,0,1)", [(2, None, {**K, "v1": 1})]),
    ("INSERT INTO t (pk,ck,v1,v2) VALUES (0,0,1,null)", [(2, None, {**K, "v1": 1, "cdc$deleted_v2": True})]),
    ("INSERT INTO t (pk,ck) VALUES (0,0)", [(2, None, K)]),
    ("UPDATE t SET v1=5, v2=6 WHERE pk=0 AND ck=0", [(1, None, {**K, "v1": 5, "v2": 6})]),
    ("UPDATE t SET v2=null WHERE pk=0 AND ck=0", [(1, None, {**K, "cdc$deleted_v2": True})]),
    ("DELETE v2 FROM t WHERE pk=0 AND ck=0", [(1, None, {**K, "cdc$deleted_v2": True})]),
    ("DELETE FROM t WHERE pk=0 AND ck=0", [(3, None, K)]),
    ("DELETE FROM t WHERE pk=0", [(4, None, {"pk": 0})]),
    ("INSERT INTO t (pk,ck,v1) VALUES (0,0,1) USING TTL 10", [(2, 10, {**K, "v1": 1})]),
    (
        "INSERT INTO t (pk,ck,v1,v2) VALUES (0,0,1,null) USING TTL 10",
        [(2, 10, {**K, "v1": 1}), (1, None, {**K, "cdc$deleted_v2": True})],
    ),
    ("UPDATE t USING TTL 5 SET v1=0 WHERE pk=0 AND ck=0", [(1, 5, {**K, "v1": 0})]),
    (
        "UPDATE t USING TTL 5 SET v1=0, v2=null WHERE pk=0 AND ck=0",
        [(1, None, {**K, "cdc$deleted_v2": True}), (1, 5, {**K, "v1": 0})],
    ),
    ("UPDATE t USING TTL 5 SET v2=null WHERE pk=0 AND ck=0", [(1, None, {**K, "cdc$deleted_v2": True})]),
    ("UPDATE t SET s=7 WHERE pk=0", [(1, None, {"pk": 0, "s": 7})]),
    ("INSERT INTO t (pk,s) VALUES (0,7)", [(1, None, {"pk": 0, "s": 7})]),
    ("UPDATE t SET s=0, v1=0 WHERE pk=0 AND ck=0", [(1, None, {"pk": 0, "s": 0}), (1, None, {**K, "v1": 0})]),
    ("INSERT INTO t (pk,ck,s,v1) VALUES (0,0,0,0)", [(1, None, {"pk": 0, "s": 0}), (2, None, {**K, "v1": 0})]),
    (
        "DELETE FROM t WHERE pk=0 AND ck IN (1,2)",
        [(3, None, {"pk": 0, "ck": 1}), (3, None, {"pk": 0, "ck": 2})],
    ),
    (
        "BEGIN UNLOGGED BATCH UPDATE t SET v1=0 WHERE pk=0 AND ck=0; UPDATE t SET v1=0 WHERE pk=0 AND ck=1;"
        " APPLY BATCH",
        [(1, None, {**K, "v1": 0}), (1, None, {"pk": 0, "ck": 1, "v1": 0})],
    ),
]

# Range deletes on `t` (pk 0): WHERE clause, (op, ck) of the start row, (op, ck) of the end row.
RANGE_CASES: list[tuple[str, tuple[int, int | None], tuple[int, int | None]]] = [
    ("ck > 0 AND ck < 5", (6, 0), (8, 5)),
    ("ck >= 0 AND ck <= 5", (5, 0), (7, 5)),
    ("ck <= 2 AND ck > 0", (6, 0), (7, 2)),
    ("ck < 3", (5, None), (8, 3)),
    ("ck > 3", (6, 3), (7, None)),
]

# UPDATE c SET <assignment> WHERE pk=0 AND ck=0: the non-null values of its single op-1 row.
COLLECTION_CASES: list[tuple[str, dict[str, Any]]] = [
    ("m = m + {1:'a', 2:'b'}", {"m": {1: "a", 2: "b"}}),
    ("m[5] = 'x'", {"m": {5: "x"}}),
    ("m = m - {1, 3}", {"cdc$deleted_elements_m": {1, 3}}),
    ("m[5] = null", {"cdc$deleted_elements_m": {5}}),
    ("m = {1:'a'}", {"m": {1: "a"}, "cdc$deleted_m": True}),
    ("m = null", {"cdc$deleted_m": True}),
    ("m = {}", {"cdc$deleted_m": True}),
    ("m = m + {3:'c'}, m = m - {2}", {"m": {3: "c"}, "cdc$deleted_elements_m": {2}}),
    ("st = st + {1,2}", {"st": {1, 2}}),
    ("st = st - {1,2,3}", {"cdc$deleted_elements_st": {1, 2, 3}}),
    ("st = {1,2}", {"st": {1, 2}, "cdc$deleted_st": True}),
    ("u.a = 0, u.b = 1", {"u": (0, 1, None)}),
    ("u.a = null, u.b = null", {"u": (None, None, None), "cdc$deleted_elements_u": {0, 1}}),
    ("u.a = 42, u.c = null", {"u": (42, None, None), "cdc$deleted_elements_u": {2}}),
    ("u = {a:1, b:2}", {"u": (1, 2, None), "cdc$deleted_u": True}),
    ("u = null", {"u": (None, None, None), "cdc$deleted_u": True}),
    ("fm = {1:1}", {"fm": {1: 1}}),
    ("fm = null", {"cdc$deleted_fm": True}),
]


def mixed_batch(t: int) -> str:
    """test_change_splitting's batch on `t`, statements at T..T+5 (markers merge: T+4 wins)."""
    return f"""BEGIN UNLOGGED BATCH
        DELETE FROM t USING TIMESTAMP {t} WHERE pk=1;
        DELETE FROM t USING TIMESTAMP {t + 1} WHERE pk=1 AND ck>=0 AND ck<3;
        DELETE FROM t USING TIMESTAMP {t + 2} WHERE pk=1 AND ck=0;
        INSERT INTO t (pk,ck,v1) VALUES (1,0,1) USING TIMESTAMP {t + 3};
        UPDATE t USING TIMESTAMP {t + 3} SET v2=2 WHERE pk=1 AND ck=0;
        INSERT INTO t (pk,ck,m) VALUES (1,0,{{3:3}}) USING TIMESTAMP {t + 4};
        INSERT INTO t (pk,ck,m) VALUES (1,1,{{4:4}}) USING TIMESTAMP {t + 5} AND TTL 5;
        APPLY BATCH"""


_K0, _K1 = {"pk": 1, "ck": 0}, {"pk": 1, "ck": 1}
# The records of `mixed_batch`, at T+0 .. T+5.
MIXED_BATCH_RECORDS: list[Rows] = [
    [(4, None, {"pk": 1})],
    [(5, None, _K0), (8, None, {"pk": 1, "ck": 3})],
    [(3, None, _K0)],
    [(1, None, {**_K0, "v1": 1, "v2": 2})],
    [(2, None, {**_K0, "m": {3: 3}, "cdc$deleted_m": True})],
    [(2, 5, _K1), (1, None, {**_K1, "cdc$deleted_m": True}), (1, 5, {**_K1, "m": {4: 4}})],
]
