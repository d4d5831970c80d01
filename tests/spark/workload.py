"""A seeded random workload on two CDC tables through the emulator, and the base tables read back
in the form the mirror's rows are compared in (shared by the Spark tests and bench/spark_bench.py).

`items` has a clustering key (range deletes and partition deletes go to the dropped-changes
topic); `users` has none (a partition delete is a row delete). Operations: inserts, partial
updates, set-to-null (SET x = null and DELETE x), collection element changes (set add/remove,
map put/remove) and overwrites, row deletes, range deletes, partition deletes.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from bridge_devstack.sim import Emulator

TABLES = {
    "items": "pk int, ck int, v int, t text, s set<int>, m map<int, text>, d date, PRIMARY KEY (pk, ck)",
    "users": "id int PRIMARY KEY, name text, score bigint, tags set<text>, props map<text, int>",
}
ITEM_PARTITIONS, ITEM_ROWS, USERS = 12, 8, 40


def create_tables(emu: Emulator, keyspace: str) -> list[str]:
    for table, columns in TABLES.items():
        emu.execute(f"CREATE TABLE {keyspace}.{table} ({columns}) WITH cdc = {{'enabled': true}}")
    return [f"{keyspace}.{table}" for table in TABLES]


def _items(rng: random.Random, ks: str, i: int) -> tuple[str, str]:
    pk, ck = rng.randrange(ITEM_PARTITIONS), rng.randrange(ITEM_ROWS)
    where = f"WHERE pk = {pk} AND ck = {ck}"
    table = f"{ks}.items"
    kind = rng.choices(["insert", "update", "null", "elements", "overwrite", "delete", "range", "partition"],
                       [25, 20, 10, 20, 5, 10, 6, 4])[0]
    if kind == "insert":
        return kind, (f"INSERT INTO {table} (pk, ck, v, t, d) VALUES ({pk}, {ck}, {i}, 't{i}', "
                      f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d}')")
    if kind == "update":
        return kind, rng.choice([f"UPDATE {table} SET v = {i} {where}",
                                 f"UPDATE {table} SET t = 'u{i}', v = {i} {where}"])
    if kind == "null":
        return kind, rng.choice([f"UPDATE {table} SET v = null {where}", f"DELETE t FROM {table} {where}",
                                 f"UPDATE {table} SET d = null, t = null {where}"])
    if kind == "elements":
        return kind, rng.choice([
            f"UPDATE {table} SET s = s + {{{i % 7}}} {where}",
            f"UPDATE {table} SET s = s - {{{i % 7}}} {where}",
            f"UPDATE {table} SET m[{i % 5}] = 'e{i}' {where}",
            f"UPDATE {table} SET m = m - {{{i % 5}}}, s = s + {{{i % 3}}} {where}",
            f"UPDATE {table} SET m = m + {{{i % 4}: 'p{i}', {5 + i % 3}: 'q{i}'}} {where}",
        ])
    if kind == "overwrite":
        return kind, rng.choice([f"UPDATE {table} SET s = {{{i % 9}, {i % 4}}} {where}",
                                 f"UPDATE {table} SET m = {{{i % 6}: 'o{i}'}} {where}",
                                 f"UPDATE {table} SET s = {{}} {where}"])
    if kind == "delete":
        return kind, f"DELETE FROM {table} {where}"
    if kind == "range":
        low, high = sorted(rng.sample(range(ITEM_ROWS), 2))
        return kind, rng.choice([f"DELETE FROM {table} WHERE pk = {pk} AND ck > {low}",
                                 f"DELETE FROM {table} WHERE pk = {pk} AND ck < {high}",
                                 f"DELETE FROM {table} WHERE pk = {pk} AND ck >= {low} AND ck <= {high}"])
    return kind, f"DELETE FROM {table} WHERE pk = {pk}"


def _users(rng: random.Random, ks: str, i: int) -> tuple[str, str]:
    key = rng.randrange(USERS)
    where = f"WHERE id = {key}"
    table = f"{ks}.users"
    kind = rng.choices(["insert", "update", "null", "elements", "overwrite", "delete"], [25, 20, 10, 25, 5, 15])[0]
    if kind == "insert":
        return kind, f"INSERT INTO {table} (id, name, score) VALUES ({key}, 'n{i}', {i * 1000})"
    if kind == "update":
        return kind, f"UPDATE {table} SET score = {i} {where}"
    if kind == "null":
        return kind, rng.choice([f"UPDATE {table} SET name = null {where}", f"DELETE score FROM {table} {where}"])
    if kind == "elements":
        return kind, rng.choice([f"UPDATE {table} SET tags = tags + {{'g{i % 6}'}} {where}",
                                 f"UPDATE {table} SET tags = tags - {{'g{i % 6}'}} {where}",
                                 f"UPDATE {table} SET props['k{i % 4}'] = {i} {where}",
                                 f"UPDATE {table} SET props = props - {{'k{i % 4}'}} {where}"])
    if kind == "overwrite":
        return kind, f"UPDATE {table} SET tags = {{'w{i % 3}'}}, props = {{'z': {i}}} {where}"
    return kind, f"DELETE FROM {table} {where}"


def run(emu: Emulator, keyspace: str, operations: int, seed: int, start: int = 0) -> Counter[str]:
    """`operations` random statements over both tables; returns how many of each kind ran."""
    rng = random.Random(seed)
    kinds: Counter[str] = Counter()
    for i in range(start, start + operations):
        kind, cql = _items(rng, keyspace, i) if rng.random() < 0.6 else _users(rng, keyspace, i)
        emu.execute(cql)
        kinds[kind] += 1
    return kinds


def _canonical(value: Any) -> Any:
    """Driver and Spark values in one comparable form (empty collections are null, as in CQL)."""
    if value is None:
        return None
    if hasattr(value, "items"):
        return {k: _canonical(v) for k, v in value.items()} or None
    if isinstance(value, list | tuple | set | frozenset) or type(value).__name__ == "SortedSet":
        return sorted(_canonical(v) for v in value) or None
    if type(value).__name__ == "Date":  # cassandra.util.Date
        return value.date()
    return value


def base_rows(session: Any, keyspace: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    key = ("pk", "ck") if table == "items" else ("id",)
    rows = {}
    for row in session.execute(f"SELECT * FROM {keyspace}.{table}"):
        values = {name: _canonical(getattr(row, name)) for name in row._fields}
        rows[tuple(values[k] for k in key)] = values
    return rows


def mirror_rows(spark: Any, path: str, table: str, frame: Any = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The Delta table's rows at `path` (or those of `frame`, e.g. the mirror's current-state view)."""
    key = ("pk", "ck") if table == "items" else ("id",)
    frame = spark.read.format("delta").load(path) if frame is None else frame
    columns = [c for c in frame.columns if not c.startswith("_cdc_")]
    rows = {}
    for row in frame.select(*columns).collect():
        values = {name: _canonical(row[name]) for name in columns}
        rows[tuple(values[k] for k in key)] = values
    return rows


def differences(base: dict[Any, Any], mirror: dict[Any, Any], limit: int = 10) -> list[str]:
    found = []
    for key in sorted(set(base) | set(mirror), key=str):
        if base.get(key) != mirror.get(key):
            found.append(f"{key}: base {base.get(key)} mirror {mirror.get(key)}")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])
