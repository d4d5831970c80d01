"""`cdc-bridge run` end to end in the advanced output format (issue 25): real worker processes, the
emulator on Cassandra, real Kafka and Apicurio. Expectations restated from the Java connector's
reference (../shared/reference/connector.md §2.7-2.9, from its `CdcIncludePkAllLocationsIT`,
`CdcIncludeBeforeAfterNoneIT`, `ScyllaCompositePkPlainConnectorIT`) and checked on keys, values,
headers and tombstones as a consumer reads them (read_committed)."""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import RecordWithHeaders, WorkerProcess, read_topic_with_headers, wait_for

ALL_PLACEMENTS = "kafka-key,payload-after,payload-before,payload-key,kafka-headers"


def _json(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def _events(messages: list[RecordWithHeaders]) -> list[tuple[Any, Any, list[tuple[str, bytes]]]]:
    """(key, value without `source`/`ts_*`, headers) per record, in topic order per key."""
    found = []
    for key, value, headers in messages:
        envelope = _json(value)
        if envelope is not None:
            assert envelope["source"]["connector"] == "scylla" and envelope["transaction"] is None
            envelope = {k: v for k, v in envelope.items() if k not in ("source", "ts_ms", "ts_us", "ts_ns",
                                                                       "transaction")}
        found.append((_json(key), envelope, headers))
    return found


def _by_key(events: list[tuple[Any, Any, list[tuple[str, bytes]]]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = collections.defaultdict(list)
    for key, envelope, headers in events:
        grouped[json.dumps(key, sort_keys=True)].append((envelope, headers))
    return dict(grouped)


def _committed(bootstrap: str, topic: str) -> int:
    """How many records a read_committed consumer sees in `topic` now."""
    return len(read_topic_with_headers(bootstrap, topic, expected=1 << 30, timeout_s=2.0, settle_s=0))


def _started(worker: WorkerProcess) -> Callable[[], bool]:
    return lambda: any(e.get("event") == "worker running" for e in worker.events())


def _advanced(**extra: object) -> dict[str, object]:
    return {"cdc__output__format": "advanced", **extra}


# ------------------------------------------------------------------ (a) JSON, full/full, every placement


def test_full_images_every_placement_json_without_schemas(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """before=full, after=full, key in all five places: insert, update, column delete and
    partition delete of a table without clustering key; insert, update of a collection and a
    UDT, row delete and partition delete of a composite-key table. A SIGKILL and a restart in the
    middle of a backlog: every change once."""
    images = "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    emulator.execute(f"CREATE TYPE {keyspace}.address (street text, zip int)")
    emulator.execute(f"CREATE TABLE {keyspace}.users (id int PRIMARY KEY, name text, tags set<text>) {images}")
    emulator.execute(f"CREATE TABLE {keyspace}.items (pk1 int, pk2 text, ck int, v text, scores map<text, int>,"
                     f" addr address, PRIMARY KEY ((pk1, pk2), ck)) {images}")
    users, items = f"{keyspace}.users", f"{keyspace}.items"
    config = config_for([users, items], **_advanced(
        cdc__include__before="full", cdc__include__after="full",
        **{"cdc.include.primary-key.placement": ALL_PLACEMENTS}))
    worker = workers(config, "full")
    wait_for(_started(worker), 60, "the worker to start")

    for statement in (
        f"INSERT INTO {users} (id, name, tags) VALUES (1, 'ann', {{'a'}})",
        f"UPDATE {users} SET name = 'anne' WHERE id = 1",
        f"DELETE name FROM {users} WHERE id = 1",
        f"DELETE FROM {users} WHERE id = 1",
        f"INSERT INTO {items} (pk1, pk2, ck, v, scores, addr) VALUES (7, 'x', 1, 'one', {{'m': 1}},"
        " {street: 'main', zip: 10})",
        f"UPDATE {items} SET scores = scores + {{'n': 2}}, addr = {{street: 'high', zip: 20}}"
        " WHERE pk1 = 7 AND pk2 = 'x' AND ck = 1",
        f"DELETE FROM {items} WHERE pk1 = 7 AND pk2 = 'x' AND ck = 1",
        f"INSERT INTO {items} (pk1, pk2, ck, v) VALUES (7, 'x', 2, 'two')",
        f"DELETE FROM {items} WHERE pk1 = 7 AND pk2 = 'x'",  # clustered partition delete: no event
    ):
        emulator.execute(statement)

    user_events = _events(read_topic_with_headers(stack.kafka_bootstrap, f"{bridge_name}.{users}", expected=5))
    header = [("pk.id", b"1")]
    assert user_events == [
        ({"id": 1}, {"before": None, "after": {"id": 1, "name": "ann", "tags": ["a"]}, "key": {"id": 1},
                     "op": "c"}, header),
        ({"id": 1}, {"before": {"id": 1, "name": "ann", "tags": ["a"]},
                     "after": {"id": 1, "name": "anne", "tags": ["a"]}, "key": {"id": 1}, "op": "u"}, header),
        ({"id": 1}, {"before": {"id": 1, "name": "anne", "tags": ["a"]},
                     "after": {"id": 1, "name": None, "tags": ["a"]}, "key": {"id": 1}, "op": "u"}, header),
        ({"id": 1}, {"before": {"id": 1, "name": None, "tags": ["a"]}, "after": None, "key": {"id": 1},
                     "op": "d"}, header),
        ({"id": 1}, None, header),  # the tombstone, with the key's headers
    ]

    item_events = _events(read_topic_with_headers(stack.kafka_bootstrap, f"{bridge_name}.{items}", expected=5))
    key1 = {"pk1": 7, "pk2": "x", "ck": 1}
    # headers in the log's column order (by name), as the connector's buildPkHeaders walks it
    headers1 = [("ck.ck", b"1"), ("pk.pk1", b"7"), ("pk.pk2", b"x")]
    # a map is an array of {key, value} structs (§2.5), a UDT a struct
    row1 = {**key1, "v": "one", "scores": [{"key": "m", "value": 1}], "addr": {"street": "main", "zip": 10}}
    row1_updated = {**row1, "scores": [{"key": "m", "value": 1}, {"key": "n", "value": 2}],
                    "addr": {"street": "high", "zip": 20}}
    assert _by_key(item_events)[json.dumps(key1, sort_keys=True)] == [
        ({"before": None, "after": row1, "key": key1, "op": "c"}, headers1),
        ({"before": row1, "after": row1_updated, "key": key1, "op": "u"}, headers1),
        ({"before": row1_updated, "after": None, "key": key1, "op": "d"}, headers1),
        (None, headers1),
    ]
    key2 = {"pk1": 7, "pk2": "x", "ck": 2}
    assert _by_key(item_events)[json.dumps(key2, sort_keys=True)] == [
        ({"before": None, "after": {**key2, "v": "two", "scores": None, "addr": None}, "key": key2, "op": "c"},
         [("ck.ck", b"2"), ("pk.pk1", b"7"), ("pk.pk2", b"x")]),
    ]
    assert len(item_events) == 5, item_events  # nothing for the clustered partition delete

    # Exactly once across a SIGKILL in the middle of a backlog, and a restart on the same offsets.
    worker.kill()
    for i in range(100, 400):
        emulator.execute(f"INSERT INTO {users} (id, name) VALUES ({i}, 'u{i}')")
    again = workers(config, "again")
    topic = f"{bridge_name}.{users}"
    wait_for(lambda: _committed(stack.kafka_bootstrap, topic) >= 5 + 30, 90, "part of the backlog")
    again.kill()
    third = workers(config, "third")
    for i in range(400, 420):
        emulator.execute(f"INSERT INTO {users} (id, name) VALUES ({i}, 'u{i}')")
    every = _events(read_topic_with_headers(stack.kafka_bootstrap, topic, expected=5 + 320))
    counts = collections.Counter(key["id"] for key, envelope, _ in every if envelope is not None)
    assert {i: n for i, n in counts.items() if n != (1 if i != 1 else 4)} == {}, "duplicates or losses"
    assert set(counts) == {1, *range(100, 420)}
    for key, envelope, headers in every:
        if envelope is not None and key["id"] >= 100:
            i = key["id"]
            assert (envelope, headers) == ({"before": None, "after": {"id": i, "name": f"u{i}", "tags": None},
                                            "key": {"id": i}, "op": "c"}, [("pk.id", str(i).encode())])
    assert third.stop() == 0


# ------------------------------------------------------------------ (b) JSON with schemas, none/none


def test_no_images_default_placement_json_with_schemas(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """before=none, after=none (the defaults), default placement: every event has before and
    after null, even an insert (`CdcIncludeBeforeAfterNoneIT`); the key is only the Kafka key; no
    image option is needed on the table, no headers."""
    table = f"{keyspace}.plain"
    emulator.execute(f"CREATE TABLE {table} (id int, ck int, v text, PRIMARY KEY (id, ck))"
                     " WITH cdc = {'enabled': true}")
    config = config_for([table], **_advanced(key__converter__schemas__enable="true",
                                             value__converter__schemas__enable="true"))
    worker = workers(config, "none")
    for statement in (f"INSERT INTO {table} (id, ck, v) VALUES (1, 2, 'a')",
                      f"UPDATE {table} SET v = 'b' WHERE id = 1 AND ck = 2",
                      f"DELETE FROM {table} WHERE id = 1 AND ck = 2"):
        emulator.execute(statement)
    messages = read_topic_with_headers(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=4)
    assert [headers for _, _, headers in messages] == [[], [], [], []]
    keys = [_json(key) for key, _, _ in messages]
    prefix = f"{bridge_name}.{table}".replace("-", "_")  # struct names adjusted for Avro (the default)
    for key in keys:
        assert key["payload"] == {"id": 1, "ck": 2}
        assert key["schema"]["name"] == f"{prefix}.Key" and not key["schema"]["optional"]
        assert [f["field"] for f in key["schema"]["fields"]] == ["id", "ck"]
    values = [_json(value) for _, value, _ in messages]
    assert values[3] is None  # the tombstone
    assert [(v["payload"]["op"], v["payload"]["before"], v["payload"]["after"]) for v in values[:3]] == [
        ("c", None, None), ("u", None, None), ("d", None, None)]
    schema = values[0]["schema"]
    assert schema["name"] == f"{prefix}.Envelope"
    fields = {f["field"]: f for f in schema["fields"]}
    assert list(fields) == ["source", "before", "after", "op", "ts_ms", "transaction", "ts_us", "ts_ns"]
    assert fields["after"]["name"] == f"{prefix}.After" and fields["after"]["optional"]
    # default placement: the key columns are in before/after too (plain values, no cells)
    assert [f["field"] for f in fields["after"]["fields"]] == ["ck", "id", "v"]
    assert {f["field"]: f["type"] for f in fields["after"]["fields"]} == {"ck": "int32", "id": "int32",
                                                                         "v": "string"}
    assert worker.stop() == 0


# ------------------------------------------------------------------ (c) Avro, only-updated


def test_only_updated_avro_through_the_registry(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """before=only-updated, after=only-updated, Avro through Apicurio: an update carries the
    modified columns only (the others null, the key columns per placement); subjects are
    `<topic>-key` and `<topic>-value`, registered once."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from bridge.kafka.registry import registry_client

    table = f"{keyspace}.accounts"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, balance bigint, tags list<text>)"
                     " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}")
    url = stack.schema_registry_url
    config = config_for([table], **_advanced(
        cdc__include__before="only-updated", cdc__include__after="only-updated",
        key__converter="avro", value__converter="avro", key__converter__schema__registry__url=url,
        value__converter__schema__registry__url=url))
    worker = workers(config, "avro")
    for statement in (f"INSERT INTO {table} (id, name, balance, tags) VALUES (1, 'ann', 10, ['a'])",
                      f"UPDATE {table} SET balance = 20 WHERE id = 1",
                      f"UPDATE {table} SET tags = tags + ['b'] WHERE id = 1",
                      f"DELETE FROM {table} WHERE id = 1"):
        emulator.execute(statement)
    topic = f"{bridge_name}.{table}"
    messages = read_topic_with_headers(stack.kafka_bootstrap, topic, expected=5)
    client: Any = registry_client(url).client
    assert client.get_versions(f"{topic}-key") == [1] and client.get_versions(f"{topic}-value") == [1]
    assert client.get_latest_version(f"{topic}-value").schema.schema_str.count(f'"{topic.replace("-", "_")}')
    decode = AvroDeserializer(client)
    got = []
    for key, value, _ in messages:
        key_struct = decode(key, SerializationContext(topic, MessageField.KEY))
        envelope = None if value is None else decode(value, SerializationContext(topic, MessageField.VALUE))
        got.append((key_struct, None if envelope is None else
                    (envelope["op"], envelope["before"], envelope["after"])))
    row = {"id": 1, "name": None, "balance": None, "tags": None}
    assert got == [
        ({"id": 1}, ("c", None, {"id": 1, "name": "ann", "balance": 10, "tags": ["a"]})),
        ({"id": 1}, ("u", {**row, "balance": 10}, {**row, "balance": 20})),
        ({"id": 1}, ("u", {**row, "tags": ["a"]}, {**row, "tags": ["a", "b"]})),
        ({"id": 1}, ("d", {"id": 1, "name": "ann", "balance": 20, "tags": ["a", "b"]}, None)),
        ({"id": 1}, None),
    ]
    assert worker.stop() == 0
