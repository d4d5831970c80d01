"""One transactional producer per worker: envelopes and the offsets of the groups they came from
commit together (the KIP-618 pattern), fenced through the slot consumer group (KIP-447).

Why KIP-447 and not a transactional id per slot: one transaction can then carry every owned
slot's records (a per-slot id would need a producer, a transaction and a commit per slot), and
the group coordinator already knows who owns which slot. Every commit sends the owned slots'
(empty) offsets with the consumer's group metadata; a worker that was removed from the group
(a zombie after SIGSTOP, or one cut off from the coordinator) gets a fenced/illegal-generation
error on that call, and its transaction is aborted, so its late records never become visible.

Order inside a commit, which the hand-over relies on: records, offset records, `flush()` (all
appended on the brokers), then the group-metadata offsets, then `commit_transaction()`. A new
owner reads the offsets topic to its end before starting, and an open transaction holding offset
records holds that end back until it commits or aborts (`transaction.timeout.ms`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError, ProducerFencedError, TransactionAbortedError

log = structlog.get_logger(__name__)

# A crashed owner's open transaction blocks its slots' hand-over until the broker aborts it:
# keep that short. Commits happen every `commit.interval.ms`, far below it.
TRANSACTION_TIMEOUT_MS = 10_000
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                     KafkaError.FENCED_INSTANCE_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                     KafkaError.REBALANCE_IN_PROGRESS})


class TransactionalProducer:
    def __init__(self, client_config: dict[str, str], transactional_id: str, init_timeout_s: float = 30.0) -> None:
        config: dict[str, Any] = {
            "linger.ms": 20,
            "compression.type": "lz4",
            **with_logger(client_config),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "partitioner": "murmur2_random",  # the Java client's partitions, for keys and offsets alike
        }
        self._producer = Producer(config)
        self._delivery_error: KafkaError | None = None
        self._open = False
        self.records_in_transaction = 0
        try:
            self._producer.init_transactions(init_timeout_s)
        except KafkaException as error:
            raise KafkaUnavailableError(f"Kafka transactions could not start: {error.args[0].str()}") from None

    @property
    def is_open(self) -> bool:
        return self._open

    def produce(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Queue one record in the open transaction; waits while the local queue is full."""
        if not self._open:
            self._producer.begin_transaction()
            self._open = True
        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=self._delivered)
                break
            except BufferError:
                self._producer.poll(0.05)  # backpressure: a slow Kafka slows reading
        self.records_in_transaction += 1

    def serve(self) -> None:
        """Run delivery callbacks."""
        self._producer.poll(0)

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = error

    def commit(self, fencing: Sequence[TopicPartition], group_metadata: Any, timeout_s: float = 30.0) -> None:
        """Commit the open transaction. Raises TransactionAbortedError (aborted; re-read from
        the last commit) or ProducerFencedError (this producer is dead)."""
        if not self._open:
            return
        try:
            if self._producer.flush(timeout_s) > 0:
                raise TransactionAbortedError("records not acknowledged in time")
            if self._delivery_error is not None:
                raise TransactionAbortedError(f"a record was not delivered: {self._delivery_error.str()}")
            if fencing:
                self._producer.send_offsets_to_transaction(list(fencing), group_metadata, timeout_s)
            self._producer.commit_transaction(timeout_s)
        except KafkaException as error:
            self._fail(error.args[0])
        except TransactionAbortedError:
            self.abort()
            raise
        self._reset()

    def _fail(self, error: KafkaError) -> None:
        fenced = error.fatal() or error.code() in _FENCED
        log.warning("transaction failed", error=error.str(), fenced=fenced)
        if error.fatal():
            self._reset()
            raise ProducerFencedError(error.str())
        self.abort()
        if fenced:
            raise ProducerFencedError(error.str())
        raise TransactionAbortedError(error.str())

    def abort(self, timeout_s: float = 30.0) -> None:
        if self._open:
            try:
                self._producer.abort_transaction(timeout_s)
            except KafkaException as error:
                log.warning("abort failed", error=error.args[0].str())
                if error.args[0].fatal():
                    self._reset()
                    raise ProducerFencedError(error.args[0].str()) from None
        self._reset()

    def _reset(self) -> None:
        self._open = False
        self._delivery_error = None
        self.records_in_transaction = 0

    def queue_length(self) -> int:
        return len(self._producer)

    def close(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        if self._open:
            self.abort(max(0.1, deadline - time.monotonic()))
        self._producer.flush(max(0.1, deadline - time.monotonic()))
