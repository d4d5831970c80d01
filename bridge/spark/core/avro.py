"""Avro in the Confluent framing (byte 0, 4-byte big-endian schema id, Avro binary): the writer
schema is fetched from the registry by id (`GET /schemas/ids/{id}`, Confluent's API, which
Apicurio serves under `/apis/ccompat/v7`) and cached per id.

Spark's `from_avro` lives in the `spark-avro` package, and `spark-avro_2.13:4.2.0` is not on
Maven Central, so values are decoded by fastavro in a Python UDF into the same JSON text the
schemaless JSON converter writes (logical types left as their numbers, bytes as base64), and
then parsed with the Spark type of the writer schema like JSON with schemas. A schema change
(a column added) gives a new id, hence a new group with the new column.

`AvroRecordFlattener` is flatten's faster way into Kafka: each task decodes its records with
fastavro by their writer schema (fetched by the task from the registry, once per id) and
flattens them in Python (`bridge.spark.core.record_flattener`), writing what the Spark path writes.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from bridge.spark.core.decode import META, Group, connect_group
from bridge.spark.core.errors import BadEnvelopeError, SparkJobError
from bridge.spark.core.record_flattener import EnvelopePlan, Flattened, Flattener, Headers
from bridge.spark.core.shape import avro_to_connect
from bridge.spark.core.smt_options import SmtOptions

MAGIC = 0


def _plain(schema: Any) -> Any:
    """The schema without logical types: fastavro then returns days / milliseconds as numbers, as
    the JSON converter writes them."""
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _plain(v) for k, v in schema.items() if k != "logicalType"}
    return schema


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def decoder_for(schema_text: str) -> Callable[[bytes | None], str | None]:
    """A function from one framed Avro message to its JSON text (built lazily on executors)."""
    state: dict[str, Any] = {}

    def decode(data: bytes | None) -> str | None:
        if data is None:
            return None
        import fastavro

        parsed = state.get("schema")
        if parsed is None:
            parsed = state["schema"] = fastavro.parse_schema(_plain(json.loads(schema_text)))
        record = fastavro.schemaless_reader(io.BytesIO(bytes(data)[5:]), parsed, None)
        return orjson.dumps(record, default=_default).decode()

    return decode


class AvroDecoder:
    def __init__(self, registry_url: str, timeout_s: float = 30.0, *, advanced: bool = False) -> None:
        self.registry_url = registry_url.rstrip("/")
        self.advanced = advanced  # the envelopes are in the advanced format (plain values)
        self.timeout_s = timeout_s
        self._schemas: dict[int, str] = {}

    def schema_text(self, schema_id: int) -> str:
        if schema_id not in self._schemas:
            try:
                response = httpx.get(f"{self.registry_url}/schemas/ids/{schema_id}", timeout=self.timeout_s)
                response.raise_for_status()
            except httpx.HTTPError as error:
                raise SparkJobError(f"schema registry {self.registry_url}: schema id {schema_id}: {error}") from error
            self._schemas[schema_id] = str(response.json()["schema"])
        return self._schemas[schema_id]

    def decode_key(self, data: bytes | None) -> Any:
        """One framed Avro key (driver side), as the JSON converter's payload."""
        if not data:
            return None
        schema_id = int.from_bytes(bytes(data)[1:5], "big")
        text = decoder_for(self.schema_text(schema_id))(data)
        return orjson.loads(text) if text is not None else None

    def __call__(self, batch: DataFrame) -> Iterator[Group]:
        values = batch.where(F.col("value").isNotNull())
        schema_id = F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long")
        framed = F.substring("value", 1, 1) == F.unhex(F.lit("00"))
        found = (values.select("topic", framed.alias("framed"), schema_id.alias("sid"), "partition", "offset")
                 .groupBy("topic", "framed", "sid").agg(F.min(F.struct("partition", "offset")).alias("first"))
                 .collect())
        for row in found:
            if not row["framed"]:
                first = row["first"]
                raise BadEnvelopeError(f"topic {row['topic']} partition {first['partition']} offset "
                                       f"{first['offset']}: not Avro in the Confluent framing (magic byte)")
            text = self.schema_text(int(row["sid"]))
            connect = avro_to_connect(json.loads(text))
            members = values.where((F.col("topic") == row["topic"]) & (schema_id == row["sid"])).select(*META)
            decoded: Column = F.udf(decoder_for(text), "string")(F.col("value"))
            yield connect_group(row["topic"], members, decoded, connect, in_payload=False, advanced=self.advanced)


@dataclass
class _Writer:
    parsed: Any  # fastavro's parsed schema, logical types left out
    plan: EnvelopePlan | None  # None: not an envelope (passed unchanged)


class AvroRecordFlattener(Flattener):
    """Confluent-framed Avro envelopes, flattened record by record (the `Flattener` of a task)."""

    def __init__(self, options: SmtOptions, schemas_out: bool, registry: AvroDecoder) -> None:
        super().__init__(options, schemas_out)
        self._registry = registry
        self._writers: dict[int, _Writer] = {}

    def flatten_value(self, value: bytes, headers: Headers | None, where: Callable[[], str]) -> Flattened | None:
        import fastavro

        if len(value) < 5 or value[0] != MAGIC:
            raise BadEnvelopeError(f"{where()}: not Avro in the Confluent framing (magic byte)")
        schema_id = int.from_bytes(value[1:5], "big")
        writer = self._writers.get(schema_id)
        if writer is None:
            schema = json.loads(self._registry.schema_text(schema_id))
            writer = self._writers[schema_id] = _Writer(fastavro.parse_schema(_plain(schema)),
                                                        self.plan(avro_to_connect(schema), where))
        if writer.plan is None:
            return Flattened(value, headers)  # not an envelope (the dropped-changes topic): unchanged
        try:
            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), writer.parsed, None)
        except (ValueError, EOFError, IndexError) as error:
            raise BadEnvelopeError(f"{where()}: not readable with its writer schema {schema_id}: {error!r}") from None
        return self.apply(writer.plan, record, headers, where)
