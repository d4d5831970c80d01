"""One change record to the Kafka records that carry it: translated into envelopes
(`bridge.envelope.Translator`, pure) and serialized (JSON, or Avro through the registry).

A record written after an `ALTER TABLE ... ADD` names a column the cached schema lacks: it is
translated again with the table's schema read anew. A record that cannot be carried raises
`GroupFailure` whose message names the table and the record's position (`cdc$time`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.envelope import (
    EnvelopeError,
    RecordSerializer,
    Translation,
    TranslationError,
    Translator,
    UnknownColumnError,
    build_record_serializer,
)
from bridge.envelope.settings import EnvelopeSettings
from bridge.kafka.registry import registry_client
from bridge.scylla.errors import SchemaError
from bridge.scylla.model import ChangeRecord, SnapshotRow
from bridge.scylla.table_schema import TableSchemas

# topic, key, value (None: a tombstone), and the record's headers when it has any (advanced
# format's kafka-headers placement): (name, bytes) pairs, in order.
Headers = tuple[tuple[str, bytes], ...]
SerializedRecord = tuple[str, bytes | None, bytes | None] | tuple[str, bytes | None, bytes | None, Headers]

# The registry client is called on the worker's loop thread. Its own retries sleep there (up to
# ~7 s per call with confluent-kafka's defaults, against a registry out of reach) and without a
# timeout a silent registry would hold the loop forever: the probes, lags and the slot group all
# wait on that thread. A failed call fails its group at once instead, and the group is retried
# with the bridge's own backoff (`errors.retry.delay.max.ms`) while the loop goes on.
_LOOP_SAFE_REGISTRY = {"max.retries": 0, "timeout": 10.0}


class GroupFailure(Exception):
    """The group cannot go on past this record; the message names the table and the position.
    `record_error`: the record itself cannot be carried (a translation or a value the serializer
    cannot write), so `event.processing.failure.handling.mode` may skip it; otherwise the cause
    is outside the record (the registry, the schema) and the group is retried."""

    def __init__(self, message: str, *, record_error: bool) -> None:
        super().__init__(message)
        self.record_error = record_error


class RecordEncoder:
    def __init__(self, settings: EnvelopeSettings, schemas: TableSchemas,
                 registry_config: Callable[[str], dict[str, str]] = lambda _: {}) -> None:
        """`registry_config(url)`: the registry client's settings (auth, CA) for that URL."""
        self._schemas = schemas
        self._serializer: RecordSerializer = build_record_serializer(
            settings, lambda url: registry_client(url, **_LOOP_SAFE_REGISTRY, **registry_config(url)))
        # Avro schemas are registered when a plan is built, never inside a transaction's serialize.
        self._translator = Translator(settings, on_new_plan=self._serializer.prepare)

    def plan_table(self, keyspace: str, table: str) -> None:
        """Build the table's plan now: a missing table, a table without CDC, or a schema the
        registry refuses stops start-up instead of a group later."""
        self._translator.plan(self._schemas.get(keyspace, table))
        self._schemas.require_cdc_log(keyspace, table)

    def encode(self, record: ChangeRecord) -> tuple[Translation, list[SerializedRecord]]:
        """The record's translation (for the metrics) and its serialized Kafka records, in order."""
        where = f"{record.keyspace}.{record.table}, cdc$time {record.time}"
        return self._serialized(where, lambda: self._translate(record, where))

    def encode_snapshot(self, keyspace: str, table: str, rows: Sequence[SnapshotRow],
                        kind: str) -> tuple[Translation, list[SerializedRecord]]:
        """The `r` records of snapshot rows of whole partitions, serialized, in order."""
        where = f"{keyspace}.{table}, snapshot"

        def translate() -> Translation:
            try:
                return self._translator.translate_snapshot(rows, kind, self._schemas.get(keyspace, table))
            except TranslationError as error:  # its message names the table and the row's key
                raise GroupFailure(str(error), record_error=True) from error
            except (SchemaError, EnvelopeError) as error:
                raise GroupFailure(f"{where}: {error}", record_error=False) from error

        return self._serialized(where, translate)

    def _serialized(self, where: str,
                    translate: Callable[[], Translation]) -> tuple[Translation, list[SerializedRecord]]:
        translation = translate()
        try:
            records: list[SerializedRecord] = [
                (r.topic, *self._serializer.serialize(r), r.headers) if r.headers else
                (r.topic, *self._serializer.serialize(r))
                for r in translation.records]
        except EnvelopeError as error:  # a value this record carries that the format cannot write
            raise GroupFailure(f"{where}: {error}", record_error=True) from error
        return translation, records

    def _translate(self, record: ChangeRecord, where: str) -> Translation:
        try:
            try:
                translation = self._translator.translate(record, self._schemas.get(record.keyspace, record.table))
            except UnknownColumnError:  # written after an ALTER TABLE ... ADD: translate with the new schema
                translation = self._translator.translate(record, self._schemas.reload(record.keyspace, record.table))
        except TranslationError as error:  # its message names the table and position
            raise GroupFailure(str(error), record_error=True) from error
        except SchemaError as error:
            raise GroupFailure(str(error), record_error=False) from error
        except EnvelopeError as error:  # e.g. the registry refused a new schema after an ALTER TABLE
            raise GroupFailure(f"{where}: {error}", record_error=False) from error
        return translation
