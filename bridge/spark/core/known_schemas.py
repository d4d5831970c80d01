"""Each topic's Connect schema, parsed once (JSON with schemas), so that a micro-batch is read once.

JsonConverter writes every message as `{"schema":<schema>,"payload":<payload>}`, and a table's
messages repeat the same 4-5 KB schema text until the table is altered. A topic's first
micro-batch finds its schemas the slow way (`decode.json_groups`: a job over the micro-batch
hashes every record's schema text, then each group reads its records again). A topic whose
micro-batch held one schema is then known by that text, and the micro-batches after it need no
such job: their topics and offsets come from the micro-batch's plan (`batch_offsets`), each
record's first bytes are compared with the known text (a memcmp, no hash, no search for
`,"payload":`) and its payload parsed with the known type, in the one job that writes it.

A record whose schema differs (the table was altered meanwhile) fails its task with
`SCHEMA_CHANGED`. Nothing was committed by then (a Delta write commits after all its tasks
succeeded), so `retried` forgets what it knew and runs the micro-batch again the slow way, which
learns the new schema: once per schema change, as a restarted query would.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import structlog
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bridge.spark.core.batch_offsets import batch_ranges
from bridge.spark.core.decode import META, PAYLOAD_KEY, Group
from bridge.spark.core.kafka_ranges import KafkaRanges

log = structlog.get_logger(__name__)
SCHEMA_CHANGED = "cdc-bridge: a record's schema is not its topic's known schema"
Result = TypeVar("Result")


class KnownSchemas:
    """The known schema of each topic whose last slow-way micro-batch held one."""

    def __init__(self, reread: KafkaRanges | None) -> None:
        self.reread = reread  # the source's options, to read one topic's offsets alone
        self._by_topic: dict[str, Group] = {}  # a group of that schema (its frame unused)

    def groups(self, batch: DataFrame) -> list[Group] | None:
        """The micro-batch's envelope and dropped-change groups, each reading its topic's records
        once, without a job; None when a topic of it is not known (or its offsets are not)."""
        ranges = batch_ranges(batch)
        if ranges is None or any(topic not in self._by_topic for topic in ranges):
            return None
        groups = []
        for topic in sorted(ranges):
            known = self._by_topic[topic]
            if known.kind not in ("envelope", "dropped"):
                continue  # the jobs read envelopes and dropped changes only
            if len(ranges) == 1:
                members = batch
            elif self.reread is not None:
                members = self.reread.read(batch.sparkSession, topic, ranges[topic])
            else:
                members = batch.where(F.col("topic") == topic)
            groups.append(_parsed(members.select(*META).where(F.col("value").isNotNull()), known))
        return groups

    def learn(self, groups: list[Group]) -> None:
        """Remember each topic of a slow-way micro-batch that held one schema."""
        found: dict[str, list[Group]] = defaultdict(list)
        for group in groups:
            if group.kind != "tombstone":
                found[group.topic].append(group)
        for topic, schemas in found.items():
            if len(schemas) == 1 and schemas[0].schema_prefix is not None:
                self._by_topic[topic] = schemas[0]
            else:
                self._by_topic.pop(topic, None)

    def retried(self, body: Callable[[], Result]) -> Result:
        """`body()`, and once more the slow way if a record's schema was not its topic's known one."""
        try:
            return body()
        except Exception as error:
            if SCHEMA_CHANGED not in str(error):
                raise
            log.info("a topic's schema changed: the micro-batch is read again to learn it",
                     topics=sorted(self._by_topic))
            self._by_topic.clear()
            return body()


def _parsed(members: DataFrame, known: Group) -> Group:
    """`members` parsed with the known group's type, each checked to start with its schema text."""
    assert known.schema_prefix is not None and known.env_type is not None
    head = (known.schema_prefix + PAYLOAD_KEY).encode()
    value = F.col("value")
    start = len(head) + 1
    payload = F.substring(value, F.lit(start), F.length(value) - start).cast("string")  # without the "}"
    checked = F.when(F.substring(value, 1, len(head)) == F.lit(bytearray(head)), payload).otherwise(
        F.raise_error(F.lit(f"{SCHEMA_CHANGED} (topic {known.topic})")))
    env = F.from_json(checked, known.env_type, {"mode": "FAILFAST"})
    return replace(known, frame=members.select(*META, env.alias("env")), records=None)
