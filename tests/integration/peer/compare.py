"""Reading both sides' topics and comparing them record by record, byte for byte, but for the
fields docs/envelope.md lists as differing by design (masked here, each by its own pattern)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

# Masked, each with its reason (docs/envelope.md section 6):
_MASKS: list[tuple[re.Pattern[bytes], bytes]] = [
    # source.version: the connector's version against the bridge's.
    (re.compile(rb'"version":"[^"]*","connector":"scylla"'), b'"version":"*","connector":"scylla"'),
    # source.ts_ns: the connector derives it from the millisecond instant, the bridge from cdc$time's us.
    (re.compile(rb'("ts_us":-?\d+,"ts_ns":)-?\d+(,"keyspace_name")'), rb"\1*\2"),
    # Top-level ts_ms / ts_us / ts_ns: the processing time of each side.
    (re.compile(rb'"ts_ms":\d+,"transaction"'), b'"ts_ms":*,"transaction"'),
    (re.compile(rb'"transaction":null,"ts_us":\d+,"ts_ns":\d+'), b'"transaction":null,"ts_us":*,"ts_ns":*'),
]


def normalized(data: bytes | None, prefix: str, common: str) -> bytes | None:
    """`data` with its topic prefix replaced by `common` (each side needs its own topics) and the
    by-design fields masked."""
    if data is None:
        return None
    data = data.replace(f'"{prefix}.'.encode(), f'"{common}.'.encode())
    data = data.replace(f'"name":"{prefix}"'.encode(), f'"name":"{common}"'.encode())
    for pattern, replacement in _MASKS:
        data = pattern.sub(replacement, data)
    return data


@dataclass(frozen=True)
class Record:
    table: str  # the topic without its prefix: <keyspace>.<table>
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def read_prefix(bootstrap: str, prefix: str, isolation: str = "read_committed") -> list[Record]:
    """Every record now in the topics `<prefix>.*` (up to each partition's end offset when read),
    in partition order. Every partition is assigned at once and fetched together: one partition
    after the other, each paying a fetch round trip, a settle round over five formats' ten
    prefixes took about 40 s at load 20-39."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"peer-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=15)
        ends: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in sorted(t for t in metadata.topics if t.startswith(prefix + ".")):
            for partition in sorted(metadata.topics[topic].partitions):
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
                except KafkaException:  # a topic just created (not leader yet): read it next round
                    continue
                if high > low:
                    ends[(topic, partition)] = (low, high)
        found: dict[tuple[str, int], list[Record]] = {tp: [] for tp in ends}
        consumer.assign([TopicPartition(topic, partition, low) for (topic, partition), (low, _) in ends.items()])
        pending = set(ends)
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                tp = (message.topic() or "", message.partition() or 0)
                if message.error() is not None or tp not in ends or (message.offset() or 0) >= ends[tp][1]:
                    continue
                topic = tp[0]
                headers = tuple((n, bytes(v or b"")) for n, v in (message.headers() or []))
                found[tp].append(Record(topic[len(prefix) + 1 :], message.key(), message.value(), headers))
            # transaction markers are never returned: the position tells a partition read to its end
            positions = consumer.position([TopicPartition(topic, partition) for topic, partition in pending])
            pending = {(p.topic, p.partition) for p in positions if p.offset < ends[(p.topic, p.partition)][1]}
        return [record for tp in sorted(found) for record in found[tp]]
    finally:
        consumer.close()


def by_key(records: list[Record], prefix: str, common: str) -> dict[tuple[str, bytes | None], list[Record]]:
    """Records grouped by table and normalized key, each group in its partition's order (one key
    goes to one partition on either side, whatever their partitioners)."""
    groups: dict[tuple[str, bytes | None], list[Record]] = defaultdict(list)
    for r in records:
        key = normalized(r.key, prefix, common)
        groups[(r.table, key)].append(
            Record(
                r.table,
                key,
                normalized(r.value, prefix, common),
                tuple((n, normalized(v, prefix, common) or b"") for n, v in r.headers),
            )
        )
    return groups


def first_difference(peer: list[Record], ours: list[Record], peer_prefix: str, our_prefix: str) -> str | None:
    """None when both sides hold the same records per key in the same order; else a description
    of the first differing record of each side."""
    common = "P"
    left, right = by_key(peer, peer_prefix, common), by_key(ours, our_prefix, common)
    for group in sorted(set(left) | set(right), key=lambda g: (g[0], g[1] or b"")):
        a, b = left.get(group, []), right.get(group, [])
        for index in range(max(len(a), len(b))):
            one = a[index] if index < len(a) else None
            two = b[index] if index < len(b) else None
            if one != two:
                return (
                    f"table {group[0]}, key {group[1]!r}, record {index} of the key"
                    f" (connector {len(a)}, bridge {len(b)} records for it)\n"
                    f"  connector: {one}\n  bridge:    {two}"
                )
    return None


def lacks_image(record: Record, before: bool, after: bool) -> bool:
    """An advanced-format event of the bridge sent without an image its modes use (`before` /
    `after`: the mode is not none): an update or delete with `before` null, an insert or update
    with `after` null. ScyllaDB writes no image there (docs/envelope.md section 6), the connector
    holds such a change instead."""
    if record.value is None:
        return False
    value = json.loads(record.value.replace(b":*", b":0"))  # the masked times (normalized) as numbers
    payload = value.get("payload", value) if "schema" in value else value
    op = payload["op"]
    return (before and op in ("u", "d") and payload["before"] is None) or (
        after and op in ("c", "u") and payload["after"] is None
    )


def advanced_difference(
    peer: list[Record], ours: list[Record], peer_prefix: str, our_prefix: str, before: bool, after: bool
) -> tuple[str | None, int, int]:
    """The advanced format's comparison: every key whose bridge events all had their images must
    be equal byte for byte; a key with an image-less change is left out (its events differ by
    design). Returns (the first difference or None, keys compared, keys left out)."""
    common = "P"
    left, right = by_key(peer, peer_prefix, common), by_key(ours, our_prefix, common)
    compared = left_out = 0
    for group in sorted(set(left) | set(right), key=lambda g: (g[0], g[1] or b"")):
        a, b = left.get(group, []), right.get(group, [])
        if any(lacks_image(r, before, after) for r in b):
            left_out += 1
            continue
        compared += 1
        if a != b:
            index = next(i for i in range(max(len(a), len(b))) if a[i : i + 1] != b[i : i + 1])
            one, two = (a[index] if index < len(a) else None), (b[index] if index < len(b) else None)
            return (
                f"table {group[0]}, key {group[1]!r} (connector {len(a)}, bridge {len(b)} records, every image"
                f" present)\n  connector: {one}\n  bridge:    {two}",
                compared,
                left_out,
            )
    return None, compared, left_out
