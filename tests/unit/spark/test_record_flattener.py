"""The tasks' per-record flattening (bridge.spark.core.record_flattener) on envelopes the worker's own
JSON writer produced: values come out as the writer wrote them (Java's float and double text,
Jackson's escapes), cells unwrapped; a snapshot row (`op` = `r`) as the insert of its row; a bad
message is one error naming its place. The comparison
with the Spark-expression flattening is tests/spark/test_flatten_golden.py."""

from __future__ import annotations

import orjson
import pytest

from bridge.envelope.json_serializer import JsonSerializer
from bridge.scylla.model import Operation
from bridge.spark.core.errors import BadEnvelopeError
from bridge.spark.core.record_flattener import RecordFlattener
from bridge.spark.core.smt_options import SmtOptions
from tests.unit.envelope.support import make_table, plan_for, row, run

TABLE = make_table(partition=[("pk", "int")], regular=[
    ("d", "double"), ("f", "float"), ("ld", "frozen<list<double>>"), ("md", "map<text, float>"),
    ("mi", "map<int, double>"), ("t", "text")])
WHERE = "topic T partition 0 offset 7"


def envelope_bytes(op: str = "c", **values: object) -> bytes:
    """The insert's envelope; `op="r"`: the snapshot row of the inserted row instead (every
    column a cell, `source.snapshot` = `true`, as the worker writes one)."""
    translation = run(plan_for(TABLE), row(Operation.INSERT, pk=1, **values))
    record = translation.records[0]
    envelope = record.value
    assert envelope is not None
    if op == "r":
        after = {name: cell if name == "pk" or name.endswith("__elements") or cell is not None else {"value": None}
                 for name, cell in envelope["after"].items()}
        envelope = {**envelope, "op": "r", "after": after, "source": {**envelope["source"], "snapshot": "true"}}
    value = JsonSerializer(schemas_enable=True).serialize(record.topic, record.value_schema, envelope)
    assert value is not None
    return value


def test_values_are_written_as_the_worker_wrote_them_cells_unwrapped() -> None:
    value = envelope_bytes(d=1e21, f=0.1, ld=[1e-5, 2.5], md={"a": 3.4028234663852886e38}, mi={2: -0.0},
                           t="tab\t ctl\x01 emoji \U0001f600")
    flat = RecordFlattener(SmtOptions(), schemas_out=False).flatten(value, None, lambda: WHERE)
    assert flat is not None and flat.value is not None and flat.headers is None
    assert b'"d":1.0E21' in flat.value and b'"f":0.1' in flat.value and b'"ld":[1.0E-5,2.5]' in flat.value
    assert b'"md__elements":{"added":[{"key":"a","value":3.4028235E38}]' in flat.value
    assert b'"mi__elements":{"added":[{"key":2,"value":-0.0}]' in flat.value
    assert b'"t":"tab\\t ctl\\u0001 emoji \\uD83D\\uDE00"' in flat.value
    assert orjson.loads(flat.value)["pk"] == 1


def test_schemas_out_carries_the_flattened_schema_then_the_payload() -> None:
    flat = RecordFlattener(SmtOptions(), schemas_out=True).flatten(envelope_bytes(t="x"), None, lambda: WHERE)
    assert flat is not None and flat.value is not None
    message = orjson.loads(flat.value)
    assert message["payload"]["t"] == "x" and message["schema"]["name"].endswith(".After")
    fields = {f["field"]: f for f in message["schema"]["fields"]}
    assert {"pk", "d", "f", "ld", "md", "mi", "t"} <= fields.keys()
    assert fields["t"] == {"type": "string", "optional": True, "field": "t"}  # the cell's inner schema


@pytest.mark.parametrize("value, reason", [
    (b'{"pk":1}', "not JSON with a schema"),
    (b'{"schema":{"type":"struct","name":"x.Envelope","fields":[{"field":"after"},{"field":"before"}]},'
     b'"payload":{}}',
     "not a Connect envelope schema"),
    (b'{"schema":{"type":"struct","name":"x.Envelope"},"payload":{}}', "without `after`"),
    (b'{"schema":{"type":"struct","name":"x.Envelope","fields":[{"field":"after","type":"struct"},'
     b'{"field":"before","type":"struct"}]},"payload":[1]}', "not an envelope object"),
])
def test_a_bad_message_is_one_error_naming_its_place(value: bytes, reason: str) -> None:
    with pytest.raises(BadEnvelopeError, match=f"^{WHERE}: .*{reason}"):
        RecordFlattener(SmtOptions(), schemas_out=True).flatten(value, None, lambda: WHERE)


def test_records_that_are_not_envelopes_pass_unchanged_and_tombstones_follow_the_options() -> None:
    other = b'{"schema":{"type":"struct","name":"x.DroppedChange","fields":[]},"payload":{"kind":"range"}}'
    flattener = RecordFlattener(SmtOptions(), schemas_out=True)
    assert flattener.flatten(other, [("h", b"1")], lambda: WHERE) is not None
    assert flattener.flatten(None, None, lambda: WHERE) is None  # Debezium's tombstone: dropped by default
    keep = RecordFlattener(SmtOptions.from_properties({"delete.tombstone.handling.mode": "rewrite-with-tombstone",
                                                       "add.headers": "op"}), schemas_out=True)
    kept = keep.flatten(None, None, lambda: WHERE)
    assert kept is not None and kept.value is None and kept.headers == [("__op", b"d")]


@pytest.mark.parametrize("properties", [
    {}, {"delete.tombstone.handling.mode": "drop"}, {"delete.tombstone.handling.mode": "delete-to-tombstone"},
    {"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,source.snapshot,source.ts_us",
     "add.headers": "op"},
])
@pytest.mark.parametrize("schemas_out", [True, False])
def test_a_snapshot_row_flattens_as_the_insert_of_its_row(properties: dict[str, str], schemas_out: bool) -> None:
    """`op` = `r` (Debezium's snapshot read): `after`, kept in every delete mode, `r` as the op."""
    flattener = RecordFlattener(SmtOptions.from_properties(properties), schemas_out=schemas_out)
    insert = flattener.flatten(envelope_bytes(t="x", d=2.5), [("h", b"1")], lambda: WHERE)
    snapshot = flattener.flatten(envelope_bytes("r", t="x", d=2.5), [("h", b"1")], lambda: WHERE)
    assert insert is not None and insert.value is not None and snapshot is not None and snapshot.value is not None
    assert snapshot.value == insert.value.replace(b'"__op":"c"', b'"__op":"r"').replace(
        b'"__source_snapshot":"false"', b'"__source_snapshot":"true"')
    assert snapshot.headers == [(k, b"r" if k == "__op" else v) for k, v in insert.headers or []]
    payload = orjson.loads(snapshot.value)
    flat = payload["payload"] if schemas_out else payload
    assert (flat["t"], flat["d"], flat["f"]) == ("x", 2.5, None)
    if "add.fields" in properties:
        assert (flat["__deleted"], flat["__op"], flat["__source_snapshot"]) == ("false", "r", "true")
