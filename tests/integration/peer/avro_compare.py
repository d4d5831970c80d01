"""Avro through the registry, both sides: each record decoded with the schema its id names (the
ccompat API), as JSON text the byte comparison of compare.py then reads like JsonConverter's
output; and the schemas each side registered (subjects, versions, schema JSON, canonical form)."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from fastavro.schema import to_parsing_canonical_form

from tests.integration.peer.compare import Record


class AvroDecoder:
    """Confluent's wire format (a zero byte, a 4-byte schema id, the Avro datum) to JSON text."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client
        self._schemas: dict[int, Any] = {}

    def _schema(self, schema_id: int) -> Any:
        if schema_id not in self._schemas:
            text = self.client.get_schema(schema_id).schema_str
            self._schemas[schema_id] = fastavro.parse_schema(json.loads(text or "null"))
        return self._schemas[schema_id]

    def text(self, data: bytes | None) -> bytes | None:
        if data is None:
            return None
        if len(data) < 5 or data[0] != 0:
            return b"not Confluent's wire format: " + data[:16].hex().encode()
        datum = fastavro.schemaless_reader(io.BytesIO(data[5:]), self._schema(int.from_bytes(data[1:5], "big")))
        return json.dumps(datum, separators=(",", ":"), ensure_ascii=False, default=_plain).encode()

    def record(self, r: Record) -> Record:
        return Record(r.table, self.text(r.key), self.text(r.value), r.headers)


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def registered(client: SchemaRegistryClient, prefix: str, common: str) -> dict[str, list[str]]:
    """Every version's schema of the subjects `<prefix>.*`, the prefix replaced by `common`."""
    schemas: dict[str, list[str]] = {}
    for subject in sorted(s for s in client.get_subjects() if s.startswith(prefix + ".")):
        texts = [client.get_version(subject, v).schema.schema_str or "" for v in client.get_versions(subject)]
        schemas[common + subject[len(prefix) :]] = [t.replace(prefix + ".", common + ".") for t in texts]
    return schemas


def schema_difference(peer: dict[str, list[str]], ours: dict[str, list[str]]) -> str | None:
    """None when both sides registered the same subjects, each with as many versions and, per
    version, the same schema text, byte for byte, and the same canonical form; else the first
    difference."""
    if set(peer) != set(ours):
        return f"subjects: connector only {sorted(set(peer) - set(ours))}, bridge only {sorted(set(ours) - set(peer))}"
    for subject in sorted(peer):
        if len(peer[subject]) != len(ours[subject]):
            return f"{subject}: {len(peer[subject])} versions from the connector, {len(ours[subject])} from the bridge"
        for version, (one, two) in enumerate(zip(peer[subject], ours[subject], strict=True), 1):
            if one != two:
                return f"{subject} version {version}, schema text\n  connector: {one}\n  bridge:    {two}"
            canon_a = to_parsing_canonical_form(fastavro.parse_schema(json.loads(one)))
            canon_b = to_parsing_canonical_form(fastavro.parse_schema(json.loads(two)))
            if canon_a != canon_b:
                return f"{subject} version {version}, canonical form\n  connector: {canon_a}\n  bridge:    {canon_b}"
    return None
