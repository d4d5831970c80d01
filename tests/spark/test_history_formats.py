"""The history (`HistoryWriter`) on the inputs test_history.py does not run end to end: Avro and
JSON without schemas, in the legacy format and in the advanced one (full post-images; the key
from the Kafka key or from the payload key). The records are built by hand (the legacy ones
translated from log rows by the worker's translator, the advanced ones of
tests/unit/spark/advanced_envelopes.py), written by the worker's own serializers to a real Kafka
and read by Spark's Kafka source in the session's Spark, as tests/spark/test_advanced_topics.py
feeds the mirror.

Advanced Avro's micro-batch is re-run: its keys' versions are then recomputed from the stored
changes (the path a late change takes) and MERGEd, and nothing changes. One micro-batch per case
keeps the test lean (CI budget): late changes in several micro-batches are test_history.py's.
Every case: the versions (key, `__START_AT`, `__END_AT`, `__START_OP`, `__START_OFFSET` and the
values) equal those the records imply, and `as_of` at two instants gives the versions holding then.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from bridge.envelope import EnvelopeSettings
from bridge.envelope.plan import build_plan
from bridge.envelope.records import KafkaRecord
from bridge.envelope.translate import translate
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import ChangeRecord, LogRow, Operation
from bridge_devstack.stack.layout import Endpoints
from tests.spark.test_advanced_topics import _expected_in_delta, _read, produce
from tests.unit.envelope.support import STREAM, d, de, make_table
from tests.unit.spark.advanced_envelopes import VALUE_COLUMNS, AdvancedTable, full_after_history

BASE_US = 1_700_000_000_000_000  # full_after_history's base; the legacy records' too
Key = tuple[int, int]
Version = tuple[Key, int, int | None, str, int, dict[str, Any]]  # key, start, end, op, offset, values


def _history(spark: Any, path: str) -> list[Version]:
    return sorted((((r["pk"], r["ck"]), _micros(r["__START_AT"]), _micros(r["__END_AT"]), r["__START_OP"],
                    r["__START_OFFSET"], _values(r)) for r in spark.read.format("delta").load(path).collect()),
                  key=repr)


def _values(row: Any) -> dict[str, Any]:
    data = row.asDict(recursive=True)
    return {n: v for n, v in data.items() if n not in ("pk", "ck") and not n.startswith("__")}


def _micros(value: datetime.datetime | None) -> int | None:
    if value is None:
        return None
    return (value - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)


def _check_as_of(spark: Any, path: str, versions: list[Version], instants: tuple[int, ...]) -> None:
    from bridge.spark.history.writer import as_of

    for at in instants:
        holding = {v[0]: v[5] for v in versions if v[1] <= at and (v[2] is None or v[2] > at)}
        rows = {(r["pk"], r["ck"]): _values(r) for r in as_of(spark, path, at).collect()}
        assert rows == holding, at


# --- the advanced format -----------------------------------------------------------------------

def _key_of(record: KafkaRecord) -> Key:
    key = record.key if record.key is not None else record.value["key"]
    return key["pk"], key["ck"]


def implied_versions(records: list[KafkaRecord], schemaless: bool) -> list[Version]:
    """Full post-images: each `c` / `u` / `r` starts a version holding its image (ending the key's
    open one), a `d` ends the open one. Offsets count the tombstones, as Kafka does."""
    open_: dict[Key, tuple[int, str, int, dict[str, Any]]] = {}
    versions: list[Version] = []
    for offset, record in enumerate(records):
        if record.value is None:
            continue
        key, ts = _key_of(record), record.value["source"]["ts_us"]
        if key in open_:
            start, op, start_offset, values = open_.pop(key)
            versions.append((key, start, ts, op, start_offset, values))
        if record.value["op"] != "d":
            image = {n: record.value["after"][n] for n in VALUE_COLUMNS}
            values = _expected_in_delta(image)
            if schemaless:  # types inferred: dates stay days
                values["d"] = image["d"]
            open_[key] = (ts, record.value["op"], offset, values)
    versions += [(key, start, None, op, offset, values) for key, (start, op, offset, values) in open_.items()]
    return sorted(versions, key=repr)


@pytest.mark.parametrize(("value_format", "placement"), [
    ("avro", "kafka-key,payload-after,payload-before"),
    ("json", "payload-key"),
])
def test_history_of_advanced_records(spark: Any, stack: Endpoints, tmp_path: Path, value_format: str,
                                     placement: str) -> None:
    """Full post-images in Avro (key from the Kafka key, micro-batch re-run) and in JSON without
    schemas (key from the payload key): one version per image, ended by the next or the delete."""
    from bridge.spark.core.cdc_format import CdcFormat
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.history.writer import HistoryWriter
    from bridge.spark.jobs import SourceOptions, avro_decoder

    table = AdvancedTable(f"advh{uuid.uuid4().hex[:8]}", "ks", "t", frozenset(placement.split(",")))
    records = full_after_history(table)
    produce(stack, records, table.prefix, value_format)
    cdc = CdcFormat().overridden({"cdc.output.format": "advanced", "cdc.include.after": "full",
                                  "cdc.include.primary-key.placement": placement})
    source = SourceOptions(stack.kafka_bootstrap, (table.topic,), value_format=ValueFormat(value_format),
                           registry_url=stack.schema_registry_url, cdc=cdc)
    writer = HistoryWriter(str(tmp_path), "advh", source.value_format, avro_decoder(source), cdc,
                           source.registry_url)
    batch = _read(spark, stack, table.topic)
    path = str(tmp_path / table.keyspace / table.table)
    expected = implied_versions(records, schemaless=value_format == "json")
    writer(batch, 0)
    if value_format == "avro":
        # A re-run micro-batch changes nothing: every key is known then and not later than its
        # stored changes, so its versions are recomputed from the stored changes (the path of a
        # late change) and MERGEd; any difference from the appended ones would show below.
        writer(batch, 0)
    assert _history(spark, path) == expected
    _check_as_of(spark, path, expected, (BASE_US + 3, BASE_US + 6))


# --- the legacy format -------------------------------------------------------------------------

LEGACY_TABLE = (("pk", "int"),), (("ck", "int"),), (("v", "int"), ("t", "text"), ("s", "set<int>"))


def legacy_records(prefix: str, name: str = "t") -> list[KafkaRecord]:
    """Translated from log rows by the worker's translator: an INSERT, partial updates (a cell, a
    set's elements added then one removed, a cell nulled), and a row created and deleted (the
    delete and its tombstone)."""
    partition, clustering, regular = LEGACY_TABLE
    table = make_table(partition, clustering, regular, name=name)
    plan = build_plan(table, EnvelopeSettings(prefix))
    changes = [(1, Operation.INSERT, {"pk": 1, "ck": 1, "v": 1, "t": "a"}),
               (2, Operation.UPDATE, {"pk": 1, "ck": 1, "t": "b"}),
               (3, Operation.UPDATE, {"pk": 1, "ck": 1, "s": frozenset({3, 5})}),
               (4, Operation.UPDATE, {"pk": 1, "ck": 1, d("v"): True}),
               (5, Operation.INSERT, {"pk": 2, "ck": 1, "v": 2}),
               (6, Operation.ROW_DELETE, {"pk": 2, "ck": 1}),
               (7, Operation.UPDATE, {"pk": 1, "ck": 1, de("s"): frozenset({3})})]
    records: list[KafkaRecord] = []
    for ts, op, values in changes:
        log_row = LogRow(STREAM, timeuuid_for(BASE_US + ts), 0, op, None, True, values)
        records += translate(plan, ChangeRecord(table.keyspace, table.name, (log_row,)), BASE_US + 100).records
    return records


LEGACY_VERSIONS: list[Version] = sorted([
    ((1, 1), BASE_US + 1, BASE_US + 2, "c", 0, {"v": 1, "t": "a", "s": None}),
    ((1, 1), BASE_US + 2, BASE_US + 3, "u", 1, {"v": 1, "t": "b", "s": None}),
    ((1, 1), BASE_US + 3, BASE_US + 4, "u", 2, {"v": 1, "t": "b", "s": [3, 5]}),
    ((1, 1), BASE_US + 4, BASE_US + 7, "u", 3, {"v": None, "t": "b", "s": [3, 5]}),
    ((1, 1), BASE_US + 7, None, "u", 7, {"v": None, "t": "b", "s": [5]}),
    ((2, 1), BASE_US + 5, BASE_US + 6, "c", 4, {"v": 2, "t": None, "s": None}),  # deleted at 6 (offsets 5, 6)
], key=repr)


@pytest.mark.parametrize("value_format", ["avro", "json"])
def test_history_of_legacy_records(spark: Any, stack: Endpoints, tmp_path: Path, value_format: str) -> None:
    """Legacy cells in Avro and in JSON without schemas: partial updates keep the other cells,
    element changes edit the set, a nulled cell and a delete end versions. Two tables in one
    micro-batch, written side by side (`TABLES_AT_ONCE`), each under the streaming query's id."""
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.fold.delta_tables import NO_STATISTICS
    from bridge.spark.history.writer import HistoryWriter
    from bridge.spark.jobs import SourceOptions, avro_decoder

    prefix = f"legh{uuid.uuid4().hex[:8]}"
    topics = (f"{prefix}.ks.t", f"{prefix}.ks.u")
    for name in ("t", "u"):
        produce(stack, legacy_records(prefix, name), prefix, value_format)
    source = SourceOptions(stack.kafka_bootstrap, topics, value_format=ValueFormat(value_format),
                           registry_url=stack.schema_registry_url)
    writer = HistoryWriter(str(tmp_path), "legh", source.value_format, avro_decoder(source))
    context = spark.sparkContext
    try:
        context.setLocalProperty("sql.streaming.queryId", "the-query")
        writer(_read(spark, stack, ",".join(topics)), 0)
    finally:
        context.setLocalProperty("sql.streaming.queryId", None)
    for name in ("t", "u"):
        path = str(tmp_path / "ks" / name)
        assert _history(spark, path) == LEGACY_VERSIONS, name
        assert f"legh:the-query:ks.{name}:new" in _txn_app_ids(Path(path)), name
        changes = spark.sql(f"DESCRIBE DETAIL delta.`{writer.changes_path('ks', name)}`").collect()[0]
        assert NO_STATISTICS.items() <= changes["properties"].items(), "the changes table collects no statistics"
    _check_as_of(spark, str(tmp_path / "ks" / "t"), LEGACY_VERSIONS, (BASE_US + 3, BASE_US + 6))
    if value_format == "json":  # the command itself once (a JVM of its own)
        _check_as_of_command(spark, str(tmp_path / "ks" / "t"), BASE_US + 6)


def _check_as_of_command(spark: Any, path: str, at: int) -> None:
    """`cdc-bridge spark as-of` prints the rows holding at `at` on stdout, one JSON object each,
    and on stderr only where Spark's own console output went (no Ivy, log4j or warning)."""
    from bridge.spark.history.writer import as_of

    done = subprocess.run([sys.executable, "-m", "bridge.cli", "spark", "as-of", "--path", path,
                           "--timestamp", str(at)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert sorted((r["pk"], r["ck"]) for r in printed) == sorted(
        (r["pk"], r["ck"]) for r in as_of(spark, path, at).collect())
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("spark's own output goes to "), done.stderr


def _txn_app_ids(path: Path) -> set[str]:
    """The idempotent writers (`txnAppId`) recorded in a Delta table's log."""
    lines = (line for commit in (path / "_delta_log").glob("*.json") for line in commit.read_text().splitlines())
    return {action["txn"]["appId"] for action in map(orjson.loads, lines) if "txn" in action}
