"""One micro-batch as the mirror and the history read it: decoded groups by table, each group's
typed events (`fold.frames.change_events`, or `fold.advanced` for the advanced format), and
the range / partition deletes as the reference fold's dicts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import reduce
from typing import Any

import orjson
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bridge.spark.core.batch_offsets import offsets_in
from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.decode import SID, Group, ValueFormat, counted, decode
from bridge.spark.core.errors import BadEnvelopeError
from bridge.spark.core.kafka_ranges import KafkaRanges, Ranges
from bridge.spark.core.known_schemas import KnownSchemas
from bridge.spark.core.shape import ColumnShape
from bridge.spark.fold.advanced import AdvancedEvents, GroupKey
from bridge.spark.fold.frames import JSON_OPTIONS, MirrorColumns, change_events

Table = tuple[str, str]


class BatchReader:
    """Reads the micro-batches of one job (the advanced format's group keys are kept per batch)."""

    def __init__(self, value_format: ValueFormat, avro_decoder: Callable[[DataFrame], Iterator[Group]] | None,
                 cdc: CdcFormat, registry_url: str | None, reread: KafkaRanges | None = None) -> None:
        self.value_format, self.avro_decoder, self.cdc = value_format, avro_decoder, cdc
        self._advanced = AdvancedEvents(cdc, value_format, registry_url) if cdc.advanced else None
        self._keys: dict[int, GroupKey] = {}  # per group of the micro-batch (id), advanced only
        self.known = KnownSchemas(reread, cdc.advanced)  # JSON with schemas: each topic's schema, once it is known
        self.records: int | None = None  # of the last micro-batch, when known

    def tables(self, batch: DataFrame, ranges: dict[str, Ranges] | None
               ) -> tuple[dict[Table, list[Group]], dict[Table, list[dict[str, Any]]]]:
        """The micro-batch's envelope groups and range / partition deletes, by table. `batch`: the
        frame of `decode.prepare` the caller persists, or, JSON with schemas only, the source's
        micro-batch itself, not persisted: each topic's records are then read once by the job that
        writes them when the topic's schema is known (`known_schemas`, given the micro-batch's
        offsets, `ranges`, which count its records), else the topic's groups are found by a job
        first (`decode.json_groups`, which counts them)."""
        self._keys.clear()
        if self.value_format is ValueFormat.JSON_SCHEMAS and SID not in batch.columns:
            groups = self.known.groups(batch, ranges)
            # by its offsets when known: a known topic's records are read by no job that counts them
            self.records = offsets_in(ranges) if ranges is not None else counted(groups)
        else:
            groups = decode(batch, self.value_format, self.avro_decoder, advanced=self.cdc.advanced)
            self.records = counted(groups)
        tables: dict[Table, list[Group]] = defaultdict(list)
        for group in groups:
            if group.kind == "envelope":
                tables[group.keyspace_table].append(group)
        return tables, self._dropped(groups)

    def columns_of(self, group: Group) -> tuple[ColumnShape, ...]:
        assert group.shape is not None
        if self._advanced is None:
            return group.shape.columns
        key = self._keys.get(id(group))
        if key is None:
            key = self._keys[id(group)] = self._advanced.key_of(group)
        return self._advanced.columns_of(group, key)

    def events(self, group: Group, columns: MirrorColumns) -> DataFrame:
        """(key columns..., x): the group's changes as the fold's typed events."""
        if self._advanced is None:
            return change_events(group, columns)
        self.columns_of(group)
        return self._advanced.events(group, columns, self._keys[id(group)])

    def _dropped(self, groups: list[Group]) -> dict[Table, list[dict[str, Any]]]:
        """Range and partition deletes by table, as the fold's dicts (few: collected)."""
        found: dict[Table, list[dict[str, Any]]] = defaultdict(list)
        frames = [g.frame.select("key", "offset", F.to_json("env", JSON_OPTIONS).alias("env"))
                  for g in groups if g.kind == "dropped"]
        if not frames:
            return found
        for row in reduce(DataFrame.unionByName, frames).collect():
            env = orjson.loads(row["env"])
            source = env["source"]
            found[(source["keyspace_name"], source["table_name"])].append({
                "kind": env["kind"], "ts": source["ts_us"], "offset": row["offset"], "key": self._key(row["key"]),
                "start": env.get("start"), "start_inclusive": env.get("start_inclusive"),
                "end": env.get("end"), "end_inclusive": env.get("end_inclusive")})
        return found

    def _key(self, raw: bytes | None) -> dict[str, Any]:
        if not raw:
            return {}
        if self.value_format is ValueFormat.AVRO:
            decode_key = getattr(self.avro_decoder, "decode_key", None)
            key = decode_key(raw) if decode_key is not None else None
        else:
            key = orjson.loads(bytes(raw))
            if isinstance(key, dict) and set(key) == {"schema", "payload"}:
                key = key["payload"]
        if not isinstance(key, dict):
            raise BadEnvelopeError(f"dropped change with a key that is not a struct: {raw!r}")
        return key

