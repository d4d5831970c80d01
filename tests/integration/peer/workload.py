"""Seeded random workloads for the differential tests: CQL statements run through the emulator,
the same for the Java connector and the bridge.

Two table shapes: `legacy_table` (every scalar CQL type, a static column; what the connector's
legacy format carries: it leaves collections, UDTs and tuples out, a documented difference) and
`advanced_table` (collections, a non-frozen and a frozen UDT, a tuple, a static column and some
scalars; pre- and post-images on). Statements: inserts (some with TTL), updates of regular and
static columns (set, set to null, collection and UDT-field changes), row, column, range and
partition deletes, logged and unlogged batches, over a few partitions and rows so they overlap.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

UDT = "CREATE TYPE IF NOT EXISTS {ks}.peer_ut (a int, b text)"

SCALARS: dict[str, str] = {
    "c_ascii": "ascii",
    "c_bigint": "bigint",
    "c_blob": "blob",
    "c_bool": "boolean",
    "c_date": "date",
    "c_dec": "decimal",
    "c_double": "double",
    "c_float": "float",
    "c_inet": "inet",
    "c_int": "int",
    "c_smallint": "smallint",
    "c_text": "text",
    "c_time": "time",
    "c_ts": "timestamp",
    "c_timeuuid": "timeuuid",
    "c_tinyint": "tinyint",
    "c_uuid": "uuid",
    "c_varint": "varint",
}
ADVANCED: dict[str, str] = {
    "c_int": "int",
    "c_text": "text",
    "c_dec": "decimal",
    "c_ts": "timestamp",
    "c_blob": "blob",
    "l": "list<int>",
    "st": "set<text>",
    "m": "map<int, text>",
    "fl": "frozen<list<int>>",
    "u": "peer_ut",
    "fu": "frozen<peer_ut>",
    "tu": "tuple<int, text>",
}


def legacy_table(keyspace: str, name: str) -> str:
    columns = ", ".join(f"{c} {t}" for c, t in SCALARS.items())
    return (
        f"CREATE TABLE {keyspace}.{name} (pk int, ck int, s text static, {columns}, PRIMARY KEY (pk, ck))"
        " WITH cdc = {'enabled': true}"
    )


def advanced_table(keyspace: str, name: str) -> str:
    columns = ", ".join(f"{c} {t}" for c, t in ADVANCED.items())
    return (
        f"CREATE TABLE {keyspace}.{name} (pk int, ck int, s int static, {columns}, PRIMARY KEY (pk, ck))"
        " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )


def _text(rng: random.Random) -> str:
    pieces = ["a", "é", "😀", "'", '"', "\\", "\n", "\t", "\x01", "𝄞", " ", "Ω", "/", "z"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _int_of(bits: int) -> Callable[[random.Random], str]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return lambda rng: str(rng.choice([0, 1, -1, low, high, rng.randint(low, high)]))


def _timeuuid(rng: random.Random) -> str:
    time_low, time_mid, time_hi = rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12) | 0x1000
    return str(
        uuid.UUID(
            fields=(time_low, time_mid, time_hi, 0x80 | rng.getrandbits(6), rng.getrandbits(8), rng.getrandbits(48))
        )
    )


LITERALS: dict[str, Callable[[random.Random], str]] = {
    "ascii": lambda rng: _quote("".join(rng.choice("abc XYZ~!'09") for _ in range(rng.randint(0, 6)))),
    "bigint": _int_of(64),
    "blob": lambda rng: "0x" + rng.randbytes(rng.randint(0, 6)).hex(),
    "boolean": lambda rng: rng.choice(["true", "false"]),
    # No date before 1582-10-15: the connector counts those days in the Julian calendar (0001-01-01
    # is -719164, CQL's proleptic Gregorian count -719162), a difference kept by design (docs/envelope.md).
    "date": lambda rng: _quote(rng.choice(["1969-12-31", "2024-02-29", "1970-01-01", "2262-04-11", "1582-10-15"])),
    "decimal": lambda rng: rng.choice(["0", "-0.00", "1.5E+10", "123.456", "-7E-3", "99999999999999999999.1"]),
    "double": lambda rng: rng.choice(["0.0", "-0.0", "1e300", "3.14159", "-2.5e-7", "100.0", "NaN", "Infinity"]),
    "float": lambda rng: rng.choice(["0.0", "-0.0", "1.5", "3.4e38", "-1.25e-5", "0.1"]),
    "inet": lambda rng: _quote(rng.choice(["127.0.0.1", "::1", "10.1.2.3", "2001:db8::ff00:42:8329"])),
    "int": _int_of(32),
    "smallint": _int_of(16),
    "text": lambda rng: _quote(_text(rng)),
    "time": lambda rng: _quote(rng.choice(["00:00:00", "13:30:54.234", "23:59:59.999999999", "08:12:00.000001"])),
    "timestamp": lambda rng: rng.choice(
        ["'1960-01-01 00:00:00+0000'", "0", "1700000000123", "-1", "'2038-01-19 03:14:08.001+0000'"]
    ),
    "timeuuid": _timeuuid,
    "tinyint": _int_of(8),
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "varint": lambda rng: rng.choice(["0", "-1", str(1 << 70), str(-(1 << 65) + 3), "42"]),
    "list<int>": lambda rng: "[" + ", ".join(_int_of(32)(rng) for _ in range(rng.randint(0, 3))) + "]",
    "frozen<list<int>>": lambda rng: "[" + ", ".join(str(rng.randint(-5, 5)) for _ in range(rng.randint(0, 3))) + "]",
    "set<text>": lambda rng: "{" + ", ".join(_quote(_text(rng)) for _ in range(rng.randint(0, 3))) + "}",
    "map<int, text>": lambda rng: (
        "{" + ", ".join(f"{rng.randint(0, 9)}: {_quote(_text(rng))}" for _ in range(rng.randint(0, 3))) + "}"
    ),
    "peer_ut": lambda rng: f"{{a: {rng.randint(-3, 3)}, b: {_quote(_text(rng))}}}",
    "frozen<peer_ut>": lambda rng: f"{{a: {rng.randint(-3, 3)}, b: {_quote(_text(rng))}}}",
    "tuple<int, text>": lambda rng: f"({rng.randint(-9, 9)}, {_quote(_text(rng))})",
}


def _collection_change(rng: random.Random, column: str, cql_type: str) -> str:
    if cql_type == "list<int>":
        return rng.choice(
            [
                f"{column} = {column} + [{rng.randint(0, 9)}]",
                f"{column} = [{rng.randint(0, 9)}] + {column}",
                f"{column} = {column} - [{rng.randint(0, 9)}]",
            ]
        )
    if cql_type == "set<text>":
        return rng.choice([f"{column} = {column} + {{{_quote(_text(rng))}}}", f"{column} = {column} - {{'a'}}"])
    if cql_type == "map<int, text>":
        return rng.choice(
            [
                f"{column}[{rng.randint(0, 9)}] = {_quote(_text(rng))}",
                f"{column}[{rng.randint(0, 9)}] = null",
                f"{column} = {column} + {{{rng.randint(0, 9)}: 'x'}}",
            ]
        )
    if cql_type == "peer_ut":
        return rng.choice([f"{column}.a = {rng.randint(-3, 3)}", f"{column}.b = null"])
    return f"{column} = {LITERALS[cql_type](rng)}"


class Workload:
    """Statements for one table from one seed (`statements(n)`)."""

    def __init__(self, seed: int, keyspace: str, table: str, columns: dict[str, str], static_type: str) -> None:
        self.rng = random.Random(seed)
        self.table = f"{keyspace}.{table}"
        self.columns = columns
        self.static_type = static_type

    def _key(self) -> tuple[int, int]:
        return self.rng.randint(0, 3), self.rng.randint(0, 4)

    def _value(self, column: str) -> str:
        rng = self.rng
        return "null" if rng.random() < 0.1 else LITERALS[self.columns[column]](rng)

    def _some(self) -> list[str]:
        names = list(self.columns)
        return self.rng.sample(names, self.rng.randint(1, min(5, len(names))))

    def _static(self) -> str:
        return LITERALS[{"text": "text", "int": "int"}[self.static_type]](self.rng)

    def _one(self) -> str:
        rng, table = self.rng, self.table
        pk, ck = self._key()
        kind = rng.choices(
            ["insert", "update", "static", "collection", "row", "column", "range", "partition"],
            [30, 25, 8, 12, 8, 7, 5, 3],
        )[0]
        if kind == "insert":
            cols = self._some()
            ttl = f" USING TTL {rng.randint(100, 100000)}" if rng.random() < 0.25 else ""
            static = ["s"] if rng.random() < 0.2 else []
            names = ", ".join(["pk", "ck", *static, *cols])
            values = ", ".join([str(pk), str(ck), *[self._static() for _ in static], *[self._value(c) for c in cols]])
            return f"INSERT INTO {table} ({names}) VALUES ({values}){ttl}"
        if kind == "update":
            sets = ", ".join(f"{c} = {self._value(c)}" for c in self._some())
            ttl = f" USING TTL {rng.randint(100, 100000)}" if rng.random() < 0.2 else ""
            return f"UPDATE {table}{ttl} SET {sets} WHERE pk = {pk} AND ck = {ck}"
        if kind == "static":
            value = "null" if rng.random() < 0.2 else self._static()
            return f"UPDATE {table} SET s = {value} WHERE pk = {pk}"
        if kind == "collection":
            changeable = [
                c for c, t in self.columns.items() if t in ("list<int>", "set<text>", "map<int, text>", "peer_ut")
            ]
            if not changeable:
                return f"UPDATE {table} SET {self._some()[0]} = null WHERE pk = {pk} AND ck = {ck}"
            column = rng.choice(changeable)
            change = _collection_change(rng, column, self.columns[column])
            return f"UPDATE {table} SET {change} WHERE pk = {pk} AND ck = {ck}"
        if kind == "row":
            return f"DELETE FROM {table} WHERE pk = {pk} AND ck = {ck}"
        if kind == "column":
            return f"DELETE {', '.join(self._some()[:2])} FROM {table} WHERE pk = {pk} AND ck = {ck}"
        if kind == "range":
            low = rng.randint(0, 3)
            return f"DELETE FROM {table} WHERE pk = {pk} AND ck >= {low} AND ck < {low + rng.randint(1, 2)}"
        return f"DELETE FROM {table} WHERE pk = {pk}"

    def statements(self, count: int) -> list[str]:
        out: list[str] = []
        while len(out) < count:
            if self.rng.random() < 0.12:
                kind = self.rng.choice(["BEGIN BATCH", "BEGIN UNLOGGED BATCH"])
                inner = [s for s in (self._one() for _ in range(self.rng.randint(2, 3))) if " USING TTL" not in s]
                if inner:  # every statement drawn had a TTL: no batch (an empty one is a syntax error)
                    out.append(f"{kind} {'; '.join(inner)}; APPLY BATCH")
            else:
                out.append(self._one())
        return out
