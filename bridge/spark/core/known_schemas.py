"""Each topic's Connect schema, parsed once (JSON with schemas), so that a micro-batch is read once.

JsonConverter writes every message as `{"schema":<schema>,"payload":<payload>}`, and a table's
messages repeat the same 4-5 KB schema text until the table is altered. The topics and offsets of
a micro-batch come from its plan (`batch_offsets`). A topic seen for the first time is learnt
from its first record in each partition of the micro-batch (one small job); when they share one
schema text, the topic is known by it. Each record of a known topic has its first bytes compared
with the known text (a memcmp, no hash, no search for `,"payload":`) and its payload parsed with
the known type, in the one job that writes it.

A topic that is not known (seen with several schemas, as the dropped changes' topic, which holds
one per table) is found the slow way, over its own offsets: `decode.json_groups` hashes each of its
records' schema text in a job, then each group reads its records again. A topic found with one
schema is known from then on.

A record whose schema differs from its topic's known one (the table was altered meanwhile, or the
topic's first records were not all its micro-batch held) fails its task with `SCHEMA_CHANGED`,
naming the topic. Nothing of that topic was committed by then (a Delta write commits after all its
tasks succeeded; the appends of tables written before are skipped when the micro-batch runs
again), so `retried` forgets that topic's schema and runs the micro-batch again, the topic found
the slow way: once per schema change, as a restarted query would.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import structlog
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from bridge.spark.core.decode import META, PAYLOAD_KEY, Group, json_groups, prefixed_group
from bridge.spark.core.kafka_ranges import KafkaRanges, Ranges

log = structlog.get_logger(__name__)
SCHEMA_CHANGED = "cdc-bridge: a record's schema is not its topic's known schema"
_FAILED_TOPIC = re.compile(re.escape(SCHEMA_CHANGED) + r" \(topic ([^)]+)\)")
Result = TypeVar("Result")


class KnownSchemas:
    """The known schema of each topic: learnt from its first records, or from a slow-way
    micro-batch that held one."""

    def __init__(self, reread: KafkaRanges | None, advanced: bool = False) -> None:
        self.reread = reread  # the source's options, to read one topic's offsets alone
        self.advanced = advanced
        self._by_topic: dict[str, Group] = {}  # a group of that schema (its frame unused)
        # Not peeked: topics the slow way found with several schemas (the dropped changes' topic
        # holds one per table), or whose known schema a record contradicted.
        self._several: set[str] = set()
        self.found_slowly: list[str] = []  # the topics of the last micro-batch read the slow way

    def groups(self, batch: DataFrame, ranges: dict[str, Ranges] | None) -> list[Group]:
        """The micro-batch's groups (`ranges`: its offsets, when known): each known topic's read
        once, by the job that writes it (envelopes and dropped changes only); the other topics'
        found the slow way, over their own offsets when known, and learnt."""
        if ranges is None:
            return self._found_slowly(batch)
        peek = {topic: spans for topic, spans in ranges.items()
                if topic not in self._by_topic and topic not in self._several}
        if peek and self.reread is not None:
            self._peek(batch.sparkSession, self.reread, peek)
        groups = []
        for topic in sorted(ranges.keys() & self._by_topic.keys()):
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
        unknown = {topic: spans for topic, spans in ranges.items() if topic not in self._by_topic}
        if not unknown:
            self.found_slowly = []
            return groups
        if len(unknown) == len(ranges):
            rest = batch
        elif self.reread is not None:
            rest = self.reread.read_topics(batch.sparkSession, unknown)
        else:
            rest = batch.where(F.col("topic").isin(sorted(unknown)))
        return groups + self._found_slowly(rest)

    def _found_slowly(self, records: DataFrame) -> list[Group]:
        found = json_groups(records, advanced=self.advanced, reread=self.reread)
        self.learn(found)
        self.found_slowly = sorted({group.topic for group in found})
        return found

    def _peek(self, spark: SparkSession, reread: KafkaRanges, unknown: dict[str, Ranges]) -> None:
        """Learn each topic's schema from the first record of each of its partitions in the
        micro-batch (one small job instead of hashing every record's schema text): a topic whose
        first records share one schema text is taken to hold that schema alone (a record of another
        schema further on fails the micro-batch's read, `retried`), but the dropped changes' topic."""
        firsts = {topic: {part: (low, low + 1) for part, (low, _) in spans.items()} for topic, spans in unknown.items()}
        prefix = F.substring_index(F.col("value").cast("string"), PAYLOAD_KEY, 1)
        peeked = reread.read_topics(spark, firsts).where(F.col("value").isNotNull())
        rows = peeked.select("topic", "partition", "offset", prefix.alias("prefix")).collect()
        prefixes: dict[str, set[str]] = defaultdict(set)
        first: dict[str, Row] = {}
        for row in sorted(rows, key=lambda r: (r["partition"], r["offset"])):
            prefixes[row["topic"]].add(row["prefix"])
            first.setdefault(row["topic"], row)
        for topic, texts in prefixes.items():
            at = {"partition": first[topic]["partition"], "offset": first[topic]["offset"]}
            group = prefixed_group(topic, peeked, texts.pop(), at, self.advanced) if len(texts) == 1 else None
            # The dropped changes' topic holds one schema per table: its first records tell little.
            if group is not None and group.kind != "dropped":
                self._by_topic[topic] = group
        log.info("schemas learnt from the topics' first records", topics=sorted(unknown),
                 unknown=sorted(unknown.keys() - self._by_topic.keys()))

    def learn(self, groups: list[Group]) -> None:
        """Remember each topic of a slow-way micro-batch that held one schema."""
        found: dict[str, list[Group]] = defaultdict(list)
        for group in groups:
            if group.kind != "tombstone":
                found[group.topic].append(group)
        for topic, schemas in found.items():
            if len(schemas) == 1 and schemas[0].schema_prefix is not None:
                self._by_topic[topic] = schemas[0]
                self._several.discard(topic)
            else:
                self._by_topic.pop(topic, None)
                self._several.add(topic)

    def retried(self, body: Callable[[], Result]) -> Result:
        """`body()`, run again while a record's schema is not its topic's known one: that topic is
        then found the slow way (each known topic at most once)."""
        while True:
            try:
                return body()
            except Exception as error:
                if SCHEMA_CHANGED not in str(error):
                    raise
                named = _FAILED_TOPIC.search(str(error))
                topic = named.group(1) if named is not None else None
                if topic not in self._by_topic:
                    raise
                log.info("a topic's schema is not the one known: the micro-batch is read again", topic=topic)
                del self._by_topic[topic]
                self._several.add(topic)


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
