"""In-memory twins of the bridge's outside services, for tests and benchmarks (style.md 6.5)."""

from __future__ import annotations

import json
from typing import Any


class InProcessRegistry:
    """A Confluent-compatible schema registry in memory: one id per distinct schema text, the
    versions of each subject in registration order. It parses nothing, so names a Java registry
    would refuse pass here; the integration tests register against the real Apicurio."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.subjects: dict[str, list[int]] = {}

    def register_avro(self, subject: str, schema_text: str) -> int:
        schema_id = self.ids.setdefault(schema_text, len(self.ids) + 1)
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def schema(self, schema_id: int) -> Any:
        """The registered schema (parsed JSON) of an id."""
        return json.loads(next(text for text, i in self.ids.items() if i == schema_id))
