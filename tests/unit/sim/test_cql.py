"""The CQL subset: parsing, errors naming the unsupported part, literal values by type."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

import pytest

from bridge.scylla.schema import CqlType, parse_cql_type
from bridge_devstack.sim.cql import ast
from bridge_devstack.sim.cql.lexer import split_statements, tokenize
from bridge_devstack.sim.cql.literals import Resolver
from bridge_devstack.sim.cql.parser import parse_statement
from bridge_devstack.sim.errors import CqlSyntaxError, InvalidRequestError, UnsupportedCqlError
from bridge_devstack.sim.values import FrozenDict
from tests.unit.sim.pure import UT


def test_script_split_keeps_batches_whole() -> None:
    """`;` ends statements except inside BEGIN ... APPLY BATCH; comments and strings are skipped."""
    script = """
        CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; -- one
        INSERT INTO ks.t (pk, v) VALUES (1, 'a;b');
        BEGIN BATCH INSERT INTO ks.t (pk) VALUES (1); DELETE FROM ks.t WHERE pk = 2; APPLY BATCH;
        /* done */
    """
    parts = split_statements(script)
    assert len(parts) == 3
    assert parts[1] == "INSERT INTO ks.t (pk, v) VALUES (1, 'a;b')"
    assert parts[2].startswith("BEGIN BATCH") and parts[2].endswith("APPLY BATCH")


def test_tokens_of_literals() -> None:
    """UUIDs, blobs, negative numbers, quoted names and $$ strings tokenize as one token each."""
    texts = [t.text for t in tokenize('x = 123e4567-e89b-12d3-a456-426614174000 0xCAFE -1.5e3 "Mixed" $$a\'b$$')]
    assert texts == ["x", "=", "123e4567-e89b-12d3-a456-426614174000", "0xCAFE", "-", "1.5e3", "Mixed", "a'b", ""]


def test_update_statement_tree() -> None:
    """Every assignment form of UPDATE and every relation form of WHERE parse."""
    statement = parse_statement(
        "UPDATE ks.t USING TTL 5 AND TIMESTAMP 10 SET a = 1, m = m + {1: 'x'}, l = [0] + l, s = s - {2},"
        " m[3] = 'y', u.f = null, c += 4 WHERE pk IN (1, 2) AND (c1, c2) >= (1, 2) AND c3 < ?;"
    )
    assert isinstance(statement, ast.Update)
    assert [(a.column, a.op) for a in statement.assignments] == [
        ("a", "="),
        ("m", "+"),
        ("l", "prepend"),
        ("s", "-"),
        ("m", "element"),
        ("u", "field"),
        ("c", "+"),
    ]
    assert [(r.columns, r.op, r.is_tuple) for r in statement.where] == [
        (("pk",), "in", False),
        (("c1", "c2"), ">=", True),
        (("c3",), "<", False),
    ]
    assert statement.using.ttl == ast.Literal(statement.using.ttl.kind, "5", 22)  # type: ignore[union-attr]


def test_create_table_tree() -> None:
    """Columns, a composite key, clustering order and options (cdc kept apart later) parse."""
    statement = parse_statement(
        "CREATE TABLE IF NOT EXISTS t (pk int, pk2 text, ck timeuuid, s frozen<map<int, list<text>>> static,"
        " v vector<float, 3>, PRIMARY KEY ((pk, pk2), ck)) WITH CLUSTERING ORDER BY (ck DESC)"
        " AND cdc = {'enabled': true, 'ttl': 60} AND comment = 'x'"
    )
    assert isinstance(statement, ast.CreateTable)
    assert statement.partition_key == ("pk", "pk2") and statement.clustering_key == ("ck",)
    assert statement.clustering_order == (("ck", "desc"),)
    assert [(c.name, c.type_text, c.static) for c in statement.columns][3:] == [
        ("s", "frozen<map<int, list<text>>>", True),
        ("v", "vector<float, 3>", False),
    ]
    assert [(o.name, o.raw) for o in statement.options] == [("cdc", "{'enabled': true, 'ttl': 60}"), ("comment", "'x'")]


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("INSERT INTO t (pk) VALUES (1) IF NOT EXISTS", "IF NOT EXISTS"),
        ("UPDATE t SET v = 1 WHERE pk = 1 IF v = 2", "lightweight-transaction condition"),
        ("INSERT INTO t JSON '{}'", "INSERT JSON"),
        ("DELETE FROM t WHERE token(pk) > 3", r"token\(\) restriction"),
        ("SELECT * FROM t WHERE v CONTAINS 1", None),
        ("GRANT SELECT ON t TO bob", "statement 'GRANT'"),
        ("CREATE INDEX ON t (v)", "CREATE INDEX"),
        ("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE pk = 1; APPLY BATCH", "COUNTER BATCH"),
        ("UPDATE t USING TIMEOUT 5s SET v = 1 WHERE pk = 1", "USING TIMEOUT"),
        ("DELETE FROM t WHERE pk = 1 AND v != 2", "the != operator"),
        ("CREATE TABLE t (pk int PRIMARY KEY) WITH COMPACT STORAGE", "COMPACT STORAGE"),
    ],
)
def test_unsupported_statements_name_the_part(cql: str, message: str | None) -> None:
    """Statements outside the subset fail with UnsupportedCqlError naming what is not supported."""
    if message is None:
        assert isinstance(parse_statement(cql), ast.PassThrough)
        return
    with pytest.raises(UnsupportedCqlError, match=message):
        parse_statement(cql)


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("UPDATE t SET = 1 WHERE pk = 1", "expected a column name at position 13, found '='"),
        ("INSERT INTO t (a, b) VALUES (1)", "names 2 columns but gives 1 values"),
        ("INSERT INTO t (a) VALUES ('x)", "unterminated string"),
        ("DELETE FROM t USING TTL 5 WHERE pk = 1", "a DELETE takes no TTL"),
    ],
)
def test_syntax_errors_point_at_the_position(cql: str, message: str) -> None:
    """Malformed statements fail with CqlSyntaxError telling where."""
    with pytest.raises(CqlSyntaxError, match=message):
        parse_statement(cql)


def value(term_text: str, type_text: str) -> object:
    statement = parse_statement(f"INSERT INTO t (x) VALUES ({term_text})")
    assert isinstance(statement, ast.Insert)
    cql_type = parse_cql_type(type_text, {"ut": UT})
    return Resolver().value(statement.values[0], cql_type, "x")


@pytest.mark.parametrize(
    ("text", "type_text", "expected"),
    [
        ("-5", "tinyint", -5),
        ("12345678901234567890", "varint", 12345678901234567890),
        ("1.5", "decimal", Decimal("1.5")),
        ("0.1", "float", 0.10000000149011612),
        ("NaN", "double", "nan"),
        ("'héllo'", "text", "héllo"),
        ("0xcafe", "blob", b"\xca\xfe"),
        ("true", "boolean", True),
        ("'2024-01-02 03:04:05.678+0100'", "timestamp", datetime(2024, 1, 2, 2, 4, 5, 678000)),
        ("1000", "timestamp", datetime(1970, 1, 1, 0, 0, 1)),
        ("'192.168.0.1'", "inet", "192.168.0.1"),
        ("{1: 'a'}", "map<int, text>", FrozenDict({1: "a"})),
        ("{}", "set<int>", frozenset()),
        ("[1, 2]", "frozen<list<int>>", (1, 2)),
        ("(1, 'a')", "tuple<int, text>", (1, "a")),
        ("{a: 1, c: 3}", "ut", (1, None, 3)),
        ("[1.0, 2.0, 3.0]", "vector<float, 3>", (1.0, 2.0, 3.0)),
        ("{{1, 2}, {3}}", "set<frozen<set<int>>>", frozenset({frozenset({1, 2}), frozenset({3})})),
        ("null", "int", None),
    ],
)
def test_literal_values(text: str, type_text: str, expected: object) -> None:
    """Constants become canonical Python values of the receiving type."""
    got = value(text, type_text)
    if expected == "nan":
        assert got != got
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("text", "type_text", "message"),
    [
        ("128", "tinyint", "out of range for tinyint"),
        ("'x'", "int", "Invalid STRING constant"),
        ("{z: 1}", "ut", "Unknown field 'z'"),
        ("123e4567-e89b-42d3-a456-426614174000", "timeuuid", "not a time-based"),
        ("[1.0]", "vector<float, 3>", "expected 3 elements"),
    ],
)
def test_bad_literals_name_the_receiver(text: str, type_text: str, message: str) -> None:
    """A constant that does not fit its column fails with InvalidRequestError."""
    with pytest.raises(InvalidRequestError, match=message):
        value(text, type_text)


def test_bind_markers_take_python_values() -> None:
    """`?` markers take the params in order; UDTs may be given as dicts."""
    statement = parse_statement("INSERT INTO t (a, b) VALUES (?, ?)")
    assert isinstance(statement, ast.Insert)
    resolver = Resolver([uuid.UUID(int=1), {"a": 1, "b": 2}])
    assert resolver.value(statement.values[0], CqlType("uuid"), "a") == uuid.UUID(int=1)
    assert resolver.value(statement.values[1], UT, "b") == (1, 2, None)
