"""Our offsets records are byte for byte what Kafka Connect writes for the Java connector, checked
against Connect's own code: `connect_offsets/ConnectOffsets.java` builds the maps as the
connector does (java.util.HashMap) and serializes them with Connect's JsonConverter from Maven
Central, and its Java producer picks the offsets partition. An independent oracle: our codec was
written from reading that code, this runs it."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from bridge.kafka.offsets import encode_key, encode_value
from bridge.scylla.cdc_time import max_timeuuid
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.stream_id import StreamId
from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.services import maven_fetch_dependencies

HERE = Path(__file__).parent / "connect_offsets"
CASES = 4


@pytest.fixture(scope="module")
def java() -> list[str]:
    """`java -cp <Connect's jars> ConnectOffsets.java` (Java 17 runs a source file directly)."""
    lib = StackLayout.default().state_dir / "connect-offsets-lib"
    maven_fetch_dependencies(HERE / "pom.xml", lib)
    return ["java", "-cp", f"{lib}/*", str(HERE / "ConnectOffsets.java")]


def case(rng: random.Random, name: str) -> tuple[GroupId, Position]:
    start_us = rng.randrange(1_700_000_000_000, 1_800_000_000_000) * 1000  # the connector's whole ms
    group = GroupId(f"ks_{rng.randrange(100)}", rng.choice(["orders", "t", "a_long_table_name"]),
                    start_us // 1000 - rng.randrange(10**6), str(rng.randrange(256)))
    last = None
    if rng.random() < 0.7:
        stream = StreamId.build(rng.randrange(-2**63, 2**63), rng.getrandbits(38), rng.randrange(256))
        last = ChangeId(stream, max_timeuuid(start_us + rng.randrange(30_000_000)))
    return group, Position(start_us, start_us + 30_000_000, last)


def java_args(name: str, group: GroupId, position: Position) -> list[str]:
    key, value = group.offsets_key(), position.to_offsets_value()
    args = [name, key["keyspace_name"], key["table_name"], key["vnode_id"], key["generation_start"],
            value["window_start"], value["window_end"]]
    if "change_id_stream_id" in value:
        args += [value["change_id_stream_id"], value["change_id_time"]]
    return args


def run(java: list[str], *args: str) -> list[str]:
    done = subprocess.run([*java, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("name", ["scylla-cdc", 'naïve "quoted" connector'])
def test_offsets_bytes_equal_connects(java: list[str], name: str) -> None:
    rng = random.Random(name)
    for _ in range(CASES):
        group, position = case(rng, name)
        key_hex, value_hex = run(java, "print", *java_args(name, group, position))
        assert encode_key(name, group).hex() == key_hex
        assert encode_value(position).hex() == value_hex


def test_offsets_partition_equals_the_java_producers(java: list[str], stack: Endpoints, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=25, replication_factor=1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    rng = random.Random(7)
    ours: list[int] = []
    for _ in range(CASES):
        name = f"bridge-{uuid.uuid4().hex[:6]}"
        group, position = case(rng, name)
        (java_partition,) = run(java, "produce", stack.kafka_bootstrap, topic_name, *java_args(name, group, position))
        ours.clear()
        producer.produce(topic_name, encode_value(position), encode_key(name, group),
                         on_delivery=lambda error, message: ours.append(message.partition()))
        producer.flush(30)
        assert ours == [int(java_partition)]
