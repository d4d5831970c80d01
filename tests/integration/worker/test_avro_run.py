"""A worker writing Avro: it registers its tables' schemas in the real Apicurio when it starts
(before any transaction; `serialize` never calls the registry), its envelopes decode with the
registered schemas, and a quoted CQL column name reaches Avro adjusted. A schema the registry
refuses stops start-up with one line naming the converter setting and the subject."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.kafka.registry import registry_client
from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import CLI, WorkerProcess, read_topic, wait_for


def _avro(url: str, **extra: object) -> dict[str, object]:
    return {"key__converter": "avro", "value__converter": "avro", "key__converter__schema__registry__url": url,
            "value__converter__schema__registry__url": url, **extra}


def _create(emulator: Emulator, keyspace: str) -> str:
    emulator.execute(f'CREATE TABLE {keyspace}.orders (id int PRIMARY KEY, "my-col" text, item text)'
                     " WITH cdc = {'enabled': true}")
    return f"{keyspace}.orders"


def test_avro_worker_registers_at_start_and_delivers(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    table = _create(emulator, keyspace)
    url = stack.schema_registry_url
    worker = workers(config_for([table], **_avro(url)), "avro")
    wait_for(lambda: any(e.get("event") == "worker running" for e in worker.events()), 60, "the worker to start")
    client: Any = registry_client(url).client
    topic = f"{bridge_name}.{table}"
    # registered at start, before the table had a single change
    assert client.get_versions(f"{topic}-key") == [1] and client.get_versions(f"{topic}-value") == [1]

    for i in range(3):
        emulator.execute(f"INSERT INTO {table} (id, \"my-col\", item) VALUES ({i}, 'dash {i}', 'apple')")
    messages = read_topic(stack.kafka_bootstrap, topic, expected=3)
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    decode = AvroDeserializer(client)
    got = {}
    for key, value in messages:
        assert key is not None and value is not None
        key_struct = decode(key, SerializationContext(topic, MessageField.KEY))
        envelope = decode(value, SerializationContext(topic, MessageField.VALUE))
        got[key_struct["id"]] = (envelope["op"], envelope["after"]["my_col"], envelope["after"]["item"])
    assert got == {i: ("c", {"value": f"dash {i}"}, {"value": "apple"}) for i in range(3)}
    assert client.get_versions(f"{topic}-value") == [1]
    assert worker.stop() == 0


def test_a_refused_schema_stops_startup_with_one_line(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], stack: Endpoints, bridge_name: str,
) -> None:
    table = _create(emulator, keyspace)
    config = config_for([table], **_avro(stack.schema_registry_url, field__name__adjustment__mode="none"))
    result = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=90,
                            check=False)
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-2000:])
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        f"error: value.converter.schema.registry.url: registering the schema of subject {bridge_name}.{table}-value:"
    ), errors
