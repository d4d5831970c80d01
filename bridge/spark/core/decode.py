"""One micro-batch of raw Kafka rows -> groups of parsed records, one per (topic, writer schema).

The envelope topics of several tables, and several schema versions of one table (a column added
while the job runs), can meet in one micro-batch; each group is parsed with its own Spark type:

- JSON with schemas (`schemas.enable=true`): the Connect schema travels in every message; its
  text is hashed per row, one message per distinct schema gives the type;
- JSON without schemas: the type is inferred by Spark from the batch's messages of the topic
  (cells are then recognised by their form, and dates stay numbers; see docs/spark.md);
- Avro in the Confluent framing: the writer schema is fetched from the registry by the id in
  bytes 1-4 (`bridge.spark.core.avro`).

Each group's frame keeps the Kafka columns (`META`) and adds `env`, the parsed value.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.errors import BadEnvelopeError
from bridge.spark.core.kafka_ranges import KafkaRanges, Ranges
from bridge.spark.core.shape import (
    TableShape,
    connect_to_spark,
    plain_shape_from_connect,
    plain_shape_from_spark,
    shape_from_connect,
    shape_from_spark,
)

META = ("topic", "partition", "offset", "timestamp", "headers", "key", "value")
Kind = Literal["envelope", "dropped", "other", "tombstone"]


class ValueFormat(Enum):
    JSON = "json"  # schemaless JSON (value.converter.schemas.enable=false)
    JSON_SCHEMAS = "json-schemas"
    AVRO = "avro"


@dataclass(frozen=True)
class Group:
    """The records of one topic written with one schema (or the topic's tombstones)."""

    topic: str
    kind: Kind
    frame: DataFrame  # META columns + `env` (null for tombstones and `other`)
    env_type: T.StructType | None = None
    shape: TableShape | None = None  # of `after`/`before` (envelopes)
    connect_schema: dict[str, Any] | None = None  # the value's Connect schema, when the format has one
    records: int | None = None  # how many, when the decoding counted them (`json_groups`)
    schema_prefix: str | None = None  # JSON with schemas: every member's text before `,"payload":`

    @property
    def keyspace_table(self) -> tuple[str, str]:
        parts = self.topic.rsplit(".", 2)
        return (parts[-2], parts[-1]) if len(parts) == 3 else ("", self.topic)


def _meta() -> list[Column]:
    return [F.col(name) for name in META]


PAYLOAD_KEY = ',"payload":'
SID, START = "_sid", "_start"  # columns `prepare` adds for JSON with schemas
SCHEMA = "_schema"  # `prepare(..., payload_only=True)`: the schema part of the value, apart


def prepare(batch: DataFrame, value_format: ValueFormat, *, payload_only: bool = False) -> DataFrame:
    """The Kafka columns of a micro-batch and, for JSON with schemas, each record's group id and
    payload position: the frame the jobs persist, so that neither the Kafka read nor the hashing
    of every record's schema is repeated for each group and each action.

    `payload_only`: `value` keeps only the payload's text and the schema's text is a column of
    its own (`SCHEMA`). Persisted, that column holds a few distinct values per micro-batch, which
    Spark's in-memory columnar cache stores once per batch of rows (dictionary / run-length
    encoding), so the cache holds the payloads (about a fifth of a record) instead of every
    record's 4-5 KB schema."""
    batch = batch.select(*_meta())
    if value_format is not ValueFormat.JSON_SCHEMAS:
        return batch
    text = F.col("value").cast("string")
    prefix = F.substring_index(text, PAYLOAD_KEY, 1)
    sid = F.when(F.col("value").isNull(), F.lit("tombstone")).otherwise(F.md5(prefix))
    start = F.length(prefix) + len(PAYLOAD_KEY) + 1
    if not payload_only:
        return batch.select(*_meta(), sid.alias(SID), start.alias(START))
    payload = F.substring(text, start, F.length(text) - start).cast("binary")  # without the closing brace
    columns = [payload.alias("value") if name == "value" else F.col(name) for name in META]
    return batch.select(*columns, sid.alias(SID), F.lit(1).alias(START), prefix.alias(SCHEMA))


AvroGroups = Callable[[DataFrame], Iterator["Group"]]


def decode(batch: DataFrame, value_format: ValueFormat, avro_decoder: AvroGroups | None = None, *,
           advanced: bool = False) -> list[Group]:
    """Parse `batch` (a Kafka source micro-batch, headers included, or `prepare`'s frame of one,
    which the caller persists). `advanced`: the envelopes are in the advanced format (plain
    values; bridge.spark.core.cdc_format); an Avro decoder is told so when it is made."""
    if value_format is ValueFormat.JSON_SCHEMAS:
        return _json_with_schemas(batch if SID in batch.columns else prepare(batch, value_format), advanced)
    batch = batch.select(*_meta())
    groups = list(_tombstones(batch))
    if value_format is ValueFormat.JSON:
        groups += _json_inferred(batch, advanced)
    else:
        assert avro_decoder is not None, "Avro needs a registry"
        groups += avro_decoder(batch)
    return groups


def _tombstones(batch: DataFrame) -> Iterator[Group]:
    nulls = batch.where(F.col("value").isNull())
    for row in nulls.select("topic").distinct().collect():
        frame = nulls.where(F.col("topic") == row["topic"]).withColumn("env", F.lit(None))
        yield Group(row["topic"], "tombstone", frame)


def classify_connect(schema: dict[str, Any]) -> Kind:
    name = str(schema.get("name") or "")
    if schema.get("type") == "struct" and name.endswith(".Envelope"):
        return "envelope"
    if schema.get("type") == "struct" and name.endswith(".DroppedChange"):
        return "dropped"
    return "other"


def connect_group(topic: str, frame: DataFrame, text: Column, schema: dict[str, Any], in_payload: bool,
                  advanced: bool = False) -> Group:
    """A group whose values are JSON text written with the Connect `schema` (`advanced`: plain values)."""
    kind = classify_connect(schema)
    if kind == "other":
        return Group(topic, "other", frame.select(*_meta(), F.lit(None).alias("env")))
    env_type = connect_to_spark(schema)
    assert isinstance(env_type, T.StructType)
    parse_type = T.StructType([T.StructField("payload", env_type)]) if in_payload else env_type
    parsed = F.from_json(text, parse_type, {"mode": "FAILFAST"})
    env = parsed["payload"] if in_payload else parsed
    shape = None
    if kind == "envelope":
        after = next(f for f in schema["fields"] if f["field"] == "after")
        shape = plain_shape_from_connect(after) if advanced else shape_from_connect(after)
    return Group(topic, kind, frame.select(*_meta(), env.alias("env")), env_type, shape, schema)


def _json_with_schemas(rows: DataFrame, advanced: bool) -> list[Group]:
    """One pass finds the (topic, schema) groups and the tombstones. The schema is hashed as the
    text before `,"payload":` (JsonConverter writes `{"schema":...,"payload":...}`; that text
    cannot occur inside the schema except as a key of a struct default or of `parameters`, which
    the Python-side parse of each group's schema then catches), and only the payload part of a
    message is parsed by `from_json`, not its five times larger schema."""
    text = F.col("value").cast("string")
    payload_only = SCHEMA in rows.columns
    prefix = F.col(SCHEMA) if payload_only else F.substring(text, 1, F.col(START) - len(PAYLOAD_KEY) - 1)
    found = rows.groupBy("topic", SID).agg(F.first(prefix).alias("prefix"),
                                           F.min(F.struct("partition", "offset")).alias("first")).collect()
    groups = []
    for row in found:
        members = rows.where((F.col("topic") == row["topic"]) & (F.col(SID) == row[SID]))
        if row[SID] == "tombstone":
            groups.append(Group(row["topic"], "tombstone", members.select(*_meta(), F.lit(None).alias("env"))))
            continue
        schema = _connect_schema(row["topic"], row["first"], row["prefix"])
        start = F.col(START)
        payload = text if payload_only else F.substring(text, start, F.length(text) - start)  # without the "}"
        groups.append(connect_group(row["topic"], members, payload, schema, in_payload=False, advanced=advanced))
    return groups


def _connect_schema(topic: str, first: Any, prefix: str | None) -> dict[str, Any]:
    """The Connect schema of a group found by its first record's text before `,"payload":`."""
    where = f"topic {topic} partition {first['partition']} offset {first['offset']}"
    head = prefix or ""
    if not head.startswith('{"schema":'):
        raise BadEnvelopeError(f"{where}: not JSON with a schema (is value.converter.schemas.enable=false? "
                               "then use --format json)")
    try:
        schema = json.loads(head[len('{"schema":'):])
    except ValueError:
        raise BadEnvelopeError(f"{where}: the schema part of the message is not JSON") from None
    if not isinstance(schema, dict):
        raise BadEnvelopeError(f"{where}: the schema part of the message is not a JSON object")
    return schema


def json_groups(batch: DataFrame, advanced: bool = False, reread: KafkaRanges | None = None) -> list[Group]:
    """JSON with schemas, from a Kafka source micro-batch its caller does not persist (the
    mirror's): one job finds the (topic, schema) groups, their first records and sizes (hashing
    each record's text before `,"payload":`) and each topic's offsets per source partition; each
    group's frame then reads its records again and parses their payloads alone. A topic with one
    schema in the micro-batch (the usual case) is selected by its name: its records share the
    schema's text, so each payload starts at the same byte, and neither the hash nor the search
    for `,"payload":` is repeated. Nothing the size of a schema is cached: persisting the
    micro-batch cost more than reading it from Kafka again (docs/spark.md, "Mirror over a big
    backlog"). `reread`: when the micro-batch holds several topics, a group reads its topic's
    offsets alone from Kafka (`core.kafka_ranges`) instead of the whole micro-batch filtered by topic."""
    batch = batch.select(*_meta())
    prefix = F.substring_index(F.col("value").cast("string"), PAYLOAD_KEY, 1)
    sid = F.when(F.col("value").isNull(), F.lit("tombstone")).otherwise(
        F.concat_ws(":", F.length(prefix), F.xxhash64(prefix)))
    # Per source partition too (a few rows each), for the offsets a re-read of the topic needs.
    # The schema text is a grouping key (it sets the group id), not `first(...)`: an aggregate
    # holding a string makes Spark sort every record of the micro-batch, whole, before grouping
    # (SortAggregate), where grouping keys are hashed (HashAggregate). The text is cut out once.
    texts = batch.select("topic", "partition", "offset", prefix.alias("prefix"), F.col("value").isNull().alias("n"))
    text_sid = F.when(F.col("n"), F.lit("tombstone")).otherwise(
        F.concat_ws(":", F.length("prefix"), F.xxhash64("prefix")))
    found = texts.groupBy("topic", "partition", text_sid.alias(SID), "prefix").agg(
        F.min("offset").alias("low"), F.max("offset").alias("high"), F.count(F.lit(1)).alias("records")).collect()
    merged: dict[tuple[str, str], _Found] = {}
    ranges: dict[str, Ranges] = {}
    for row in found:
        topic, part = row["topic"], row["partition"]
        low, high = ranges.setdefault(topic, {}).get(part, (row["low"], row["high"] + 1))
        ranges[topic][part] = (min(low, row["low"]), max(high, row["high"] + 1))
        first = {"partition": part, "offset": row["low"]}
        known = merged.get((topic, row[SID]))
        if known is None or (part, row["low"]) < (known.first["partition"], known.first["offset"]):
            records = row["records"] + (known.records if known else 0)
            merged[(topic, row[SID])] = _Found(topic, row[SID], row["prefix"], first, records)
        else:
            known.records += row["records"]
    schemas = Counter(topic for topic, group_sid in merged if group_sid != "tombstone")
    groups = []
    for (topic, _), group in sorted(merged.items()):
        if reread is not None and len(ranges) > 1:
            members = reread.read(batch.sparkSession, topic, ranges[topic]).select(*_meta())
        else:
            members = batch.where(F.col("topic") == topic)
        if group.sid == "tombstone":
            groups.append(Group(topic, "tombstone", members.where(F.col("value").isNull())
                                .select(*_meta(), F.lit(None).alias("env")), records=group.records))
            continue
        members = members.where(F.col("value").isNotNull() if schemas[topic] == 1 else sid == group.sid)
        groups.append(prefixed_group(topic, members, group.prefix, group.first, advanced, group.records))
    return groups


def prefixed_group(topic: str, members: DataFrame, prefix: str, first: dict[str, int], advanced: bool = False,
                   records: int | None = None) -> Group:
    """The group of `members`, whose values all start with `prefix` (the text before
    `,"payload":`, `first` the record it was read from): each payload is parsed after it."""
    schema = _connect_schema(topic, first, prefix)
    # bytes of a binary value: the payload from after `,"payload":` to before the closing "}"
    start = len(prefix.encode()) + len(PAYLOAD_KEY) + 1
    payload = F.substring(F.col("value"), F.lit(start), F.length("value") - start).cast("string")
    parsed = connect_group(topic, members, payload, schema, in_payload=False, advanced=advanced)
    return replace(parsed, records=records, schema_prefix=prefix)


@dataclass
class _Found:
    """A (topic, schema) group of `json_groups`, its rows per source partition merged."""

    topic: str
    sid: str
    prefix: str
    first: dict[str, int]  # the first record's partition and offset
    records: int


def counted(groups: list[Group]) -> int | None:
    """The groups' records, when the decoding counted every one of them (`json_groups`)."""
    counts = [g.records for g in groups]
    return None if None in counts else sum(n for n in counts if n is not None)


def _json_inferred(batch: DataFrame, advanced: bool) -> list[Group]:
    spark: SparkSession = batch.sparkSession
    text = F.col("value").cast("string")
    values = batch.where(F.col("value").isNotNull())
    groups = []
    for row in values.select("topic").distinct().collect():
        topic = row["topic"]
        members = values.where(F.col("topic") == topic)
        inferred = spark.read.json(members.select(text.alias("value")), mode="FAILFAST").schema
        if "schema" in inferred.fieldNames() and "payload" in inferred.fieldNames():
            raise BadEnvelopeError(f"topic {topic}: the values carry schemas (schemas.enable=true); "
                                   "use --format json-schemas")
        kind = classify_inferred(inferred)
        if kind == "other":
            groups.append(Group(topic, "other", members.select(*_meta(), F.lit(None).alias("env"))))
            continue
        env = F.from_json(text, inferred, {"mode": "FAILFAST"})
        shape = None
        if kind == "envelope" and advanced:  # plain values; all-null sides (after=none) hold no column
            shape = plain_shape_from_spark(_row_type(inferred) or T.StructType([]))
        elif kind == "envelope":
            after = _row_type(inferred)
            shape = shape_from_spark(after, _key_names(members)) if after is not None else None
            if shape is None:
                kind = "other"
        groups.append(Group(topic, kind, members.select(*_meta(), env.alias("env")), inferred, shape))
    return groups


def _key_names(members: DataFrame) -> set[str]:
    """Field names of the topic's Kafka keys (schemaless JSON), from one key."""
    row = members.where(F.col("key").isNotNull()).select(F.col("key").cast("string").alias("k")).first()
    if row is None:
        return set()
    key = json.loads(row["k"])
    if not isinstance(key, dict):
        raise BadEnvelopeError(f"topic {members}: a key that is not a JSON object: {row['k'][:100]}")
    return set(key)


def classify_inferred(inferred: T.StructType) -> Kind:
    names = set(inferred.fieldNames())
    if {"op", "source"} <= names and ("after" in names or "before" in names):
        return "envelope"
    if {"kind", "source"} <= names:
        return "dropped"
    return "other"


def _row_type(inferred: T.StructType) -> T.StructType | None:
    """The row type of schemaless envelopes: `after` and `before` merged (a batch of deletes only
    has `before`), as Spark inferred them."""
    found: dict[str, T.StructField] = {}
    for side in ("after", "before"):
        if side in inferred.fieldNames() and isinstance(inferred[side].dataType, T.StructType):
            side_type = inferred[side].dataType
            assert isinstance(side_type, T.StructType)
            for field in side_type.fields:
                current = found.get(field.name)
                if current is None or not isinstance(current.dataType, T.StructType):
                    found[field.name] = field
    if not found:
        return None
    return T.StructType(sorted(found.values(), key=lambda f: f.name))
