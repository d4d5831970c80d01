"""Kafka Connect's own JsonConverter (connect-json from Maven Central, run on the JVM) accepts the
bridge's JSON-with-schemas messages and writes them back byte for byte, with schemas.enable true
and false. This is the proof of "byte-compatible with what Connect writes for the same schema and
payload" and of "accepted by Connect's schema rules".

The jars are fetched once with Maven into the user cache (`$XDG_CACHE_HOME` or ~/.cache).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import os
import shutil
import subprocess
import uuid
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from cassandra.util import Date, Duration, OrderedMap, SortedSet, Time

from bridge.envelope.json_serializer import JsonSerializer
from bridge.envelope.records import KafkaRecord
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import Operation
from bridge.scylla.schema import scalar, udt
from tests.unit.envelope.support import d, de, make_table, plan_for, row, row_with, run

pytestmark = pytest.mark.slow

CONNECT_VERSION = "4.1.0"  # the Connect API line of the Java connector (connect-api 8.1.1-ccs)
JAVA_SOURCE = Path(__file__).parent / "java" / "ConnectJsonCheck.java"
POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>connect-json-check</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-json</artifactId>
      <version>{CONNECT_VERSION}</version></dependency>
  </dependencies>
</project>
"""


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "scylla-cdc-bridge" / f"connect-json-{CONNECT_VERSION}"


@pytest.fixture(scope="module")
def java_classpath() -> str:
    """connect-json and its dependencies, plus the compiled checker."""
    for tool in ("mvn", "javac", "java"):
        assert shutil.which(tool), f"{tool} is needed for the Connect compatibility test"
    cache = _cache_dir()
    lib = cache / "lib"
    if not (lib / f"connect-json-{CONNECT_VERSION}.jar").exists():
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "pom.xml").write_text(POM)
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(cache / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
            ],
            check=True,
            timeout=600,
        )
    source = JAVA_SOURCE.read_bytes()
    classes = cache / ("classes-" + hashlib.sha256(source).hexdigest()[:12])
    if not (classes / "ConnectJsonCheck.class").exists():
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), str(JAVA_SOURCE)], check=True, timeout=300)
    return f"{classes}:{lib}/*"


def connect_round_trip(classpath: str, messages: list[bytes]) -> list[str]:
    lines = "\n".join(base64.b64encode(m).decode() for m in messages) + "\n"
    done = subprocess.run(
        ["java", "-cp", classpath, "ConnectJsonCheck"], input=lines, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


Ab = namedtuple("Ab", "a b")
UDT_AB = udt("ab", [("a", scalar("int")), ("b", scalar("text"))])
ALL_TYPES = make_table(
    partition=[("pk", "uuid"), ("pk2", "text")],
    clustering=[("ck", "timestamp")],
    static=[("s", "int")],
    regular=[
        ("c_ascii", "ascii"),
        ("c_bigint", "bigint"),
        ("c_blob", "blob"),
        ("c_boolean", "boolean"),
        ("c_date", "date"),
        ("c_decimal", "decimal"),
        ("c_double", "double"),
        ("c_duration", "duration"),
        ("c_float", "float"),
        ("c_inet", "inet"),
        ("c_int", "int"),
        ("c_smallint", "smallint"),
        ("c_text", "text"),
        ("c_time", "time"),
        ("c_timeuuid", "timeuuid"),
        ("c_tinyint", "tinyint"),
        ("c_varint", "varint"),
        ("f_list", "frozen<list<int>>"),
        ("f_map", "frozen<map<text, frozen<set<int>>>>"),
        ("f_tuple", "tuple<int, text, double>"),
        ("f_udt", "frozen<ab>"),
        ("n_list", "list<text>"),
        ("n_map", "map<int, text>"),
        ("n_set", "set<bigint>"),
        ("n_udt", "ab"),
        ("vec", "vector<float, 3>"),
    ],
    udts={"ab": UDT_AB},
)
KEY: dict[str, Any] = {
    "pk": uuid.UUID("11111111-1111-1111-1111-111111111111"),
    "pk2": "alpha",
    "ck": datetime.datetime(2024, 6, 10),
}
K1 = timeuuid_for(1_718_022_896_789_123, low=0x8000000000000001)
EVERYTHING = {
    **KEY,
    "c_ascii": "ascii",
    "c_bigint": -1234567890123,
    "c_blob": bytes.fromhex("CAFEBABE00"),
    "c_boolean": False,
    "c_date": Date(datetime.date(1969, 12, 31)),
    "c_decimal": decimal.Decimal("-12345.67E-20"),
    "c_double": 3.14159e-12,
    "c_duration": Duration(14, 3, 7_000_000_123),
    "c_float": 1.401298464324817e-45,
    "c_inet": "2001:db8::1",
    "c_int": -(2**31),
    "c_smallint": 32767,
    "c_text": 'quote " backslash \\ tab \t newline \n bell \x07 zażółć 😀',
    "c_time": Time("23:59:59.999999999"),
    "c_timeuuid": K1,
    "c_tinyint": -128,
    "c_varint": 2**100,
    "f_list": [1, 2, 3],
    "f_map": OrderedMap([("a", SortedSet([1, 2])), ("b", SortedSet())]),
    "f_tuple": (1, None, 2.5),
    "f_udt": Ab(42, "foo"),
    "n_list": {K1: "x"},
    d("n_list"): True,
    "n_map": OrderedMap([(1, "one")]),
    "n_set": SortedSet([5]),
    de("n_set"): SortedSet([6]),
    "n_udt": Ab(None, "field"),
    de("n_udt"): SortedSet([0]),
    "vec": [1.0, 0.5, 1e10],
}


def sample_records() -> list[KafkaRecord]:
    plain = plan_for(ALL_TYPES)
    imaged = plan_for(ALL_TYPES, experimental_preimages_enabled=True, experimental_postimages_enabled=True)
    side = plan_for(ALL_TYPES, dropped_changes_topic="side")
    out: list[KafkaRecord] = []
    out += run(plain, row_with(Operation.INSERT, EVERYTHING)).records
    out += run(plain, row_with(Operation.UPDATE, {**KEY, d("c_int"): True, "c_text": ""})).records
    out += run(plain, row(Operation.UPDATE, pk=KEY["pk"], pk2="alpha", s=7)).records
    out += run(
        imaged,
        row_with(Operation.PRE_IMAGE, {**KEY, "c_int": 1, d("c_text"): True}),
        row(Operation.UPDATE, **KEY, c_int=2),
        row_with(Operation.POST_IMAGE, {k: v for k, v in EVERYTHING.items() if not k.startswith("cdc$")}),
    ).records
    out += run(plain, row(Operation.ROW_DELETE, **KEY)).records
    out += run(
        side,
        row(Operation.RANGE_DELETE_START_EXCLUSIVE, pk=KEY["pk"], pk2="alpha", ck=KEY["ck"]),
        row(Operation.RANGE_DELETE_END_INCLUSIVE, pk=KEY["pk"], pk2="alpha"),
    ).records
    return out


def test_connect_accepts_and_rewrites_our_json_byte_for_byte(java_classpath: str) -> None:
    with_schemas, without_schemas = JsonSerializer(True), JsonSerializer(False)
    expected: list[tuple[bytes, bytes]] = []
    for record in sample_records():
        sides: list[tuple[Any, Any]] = [(record.key_schema, record.key), (record.value_schema, record.value)]
        for schema, value in sides:
            if value is None:
                continue  # a tombstone has no bytes to compare
            on = with_schemas.serialize(record.topic, schema, value)
            off = without_schemas.serialize(record.topic, schema, value)
            assert on is not None and off is not None
            expected.append((on, off))
    assert len(expected) == 13  # 6 records with key and value, 1 tombstone with a key only
    answers = connect_round_trip(java_classpath, [on for on, _ in expected])
    assert len(answers) == len(expected)
    for (on, off), answer in zip(expected, answers, strict=True):
        assert answer.startswith("OK "), answer
        _, connect_on, connect_off = answer.split(" ")
        assert base64.b64decode(connect_on) == on
        assert base64.b64decode(connect_off) == off


def test_connect_rejects_a_payload_that_breaks_the_schema(java_classpath: str) -> None:
    """The check is not vacuous: a required field left null is refused by Connect."""
    record = run(plan_for(ALL_TYPES), row(Operation.UPDATE, **KEY, c_int=1)).records[0]
    assert record.value is not None
    broken = {**record.value, "source": {**record.value["source"], "connector": None}}
    message = JsonSerializer(True).serialize(record.topic, record.value_schema, broken)
    assert message is not None
    [answer] = connect_round_trip(java_classpath, [message])
    assert answer.startswith("ERROR ") and "Invalid null value for required STRING field" in answer
