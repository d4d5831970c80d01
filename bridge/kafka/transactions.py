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

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError, ProducerFencedError, TransactionAbortedError

log = structlog.get_logger(__name__)

# A crashed owner's open transaction blocks its slots' hand-over until the broker aborts it:
# keep that short. Commits happen every `commit.interval.ms`, far below it.
TRANSACTION_TIMEOUT_MS = 10_000
# The group coordinator's answers to a member that is not (or no longer) the one owning the slots.
_GROUP_FENCED = frozenset({KafkaError.FENCED_INSTANCE_ID, KafkaError.ILLEGAL_GENERATION,
                           KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS})
# How long past its own timeout a transactional call may block before the producer is given up.
_GRACE_S = 5.0
_SERVE_EVERY_S = 0.5  # callbacks served while a transactional call blocks
T = TypeVar("T")


class TransactionalProducer:
    def __init__(self, client_config: dict[str, str], transactional_id: str, init_timeout_s: float = 30.0) -> None:
        config: dict[str, Any] = {
            "linger.ms": 20,
            "compression.type": "lz4",
            **with_logger(client_config),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "partitioner": "murmur2_random",  # the Java client's partitions, for keys and offsets alike
            # Only failed deliveries matter (the transaction must then abort): a callback per
            # acknowledged record was a Python call per record in `serve`/`flush` for nothing.
            "delivery.report.only.error": True,
            "on_delivery": self._delivered,
        }
        self._producer = Producer(config)
        self._delivery_error: KafkaError | None = None
        self._open = False
        self._stuck = False
        self.records_in_transaction = 0
        try:
            self._bounded(lambda: self._producer.init_transactions(init_timeout_s), init_timeout_s)
        except ProducerFencedError as error:
            raise KafkaUnavailableError(f"Kafka transactions could not start: {error}") from None
        except KafkaException as error:
            raise KafkaUnavailableError(f"Kafka transactions could not start: {error.args[0].str()}") from None

    @property
    def is_open(self) -> bool:
        return self._open

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                headers: Sequence[tuple[str, bytes]] = ()) -> None:
        """Queue one record in the open transaction (`headers`: name and bytes pairs, in order);
        waits while the local queue is full."""
        if not self._open:
            try:
                self._producer.begin_transaction()
            except KafkaException as error:  # e.g. an earlier abort still running in librdkafka
                raise ProducerFencedError(f"no new transaction: {error.args[0].str()}") from None
            self._open = True
        while True:
            try:
                if headers:
                    self._producer.produce(topic, value, key, headers=list(headers))
                else:
                    self._producer.produce(topic, value, key)
                break
            except BufferError:
                self._producer.poll(0.05)  # backpressure: a slow Kafka slows reading
            except KafkaException as error:
                # The producer's transaction state went bad underneath (seen after delivery
                # timeouts while a broker restarted: every later produce fails with "Erroneous
                # state", aborts included). Only a new producer gets out of that.
                self._reset()
                raise ProducerFencedError(f"a record could not be queued: {error.args[0].str()}") from None
        self.records_in_transaction += 1

    def serve(self) -> None:
        """Run delivery callbacks."""
        self._producer.poll(0)

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = error

    def commit(self, fencing: Sequence[TopicPartition], group_metadata: Any,
               timeout_s: float = TRANSACTION_TIMEOUT_MS / 1000) -> None:
        """Commit the open transaction. Raises TransactionAbortedError (aborted: re-read from the
        last commit) or ProducerFencedError (this producer is dead, or the commit's outcome is
        unknown: replace it and reload the committed positions from the offsets topic)."""
        if not self._open:
            return
        deadline = time.monotonic() + timeout_s
        try:
            if self._producer.flush(timeout_s) > 0:
                raise TransactionAbortedError("records not acknowledged in time")
            if self._delivery_error is not None:
                raise TransactionAbortedError(f"a record was not delivered: {self._delivery_error.str()}")
            if fencing:
                self._retrying(lambda: self._bounded(lambda: self._producer.send_offsets_to_transaction(
                    list(fencing), group_metadata, timeout_s), timeout_s), deadline)
            self._retrying(lambda: self._bounded(lambda: self._producer.commit_transaction(timeout_s), timeout_s),
                           deadline)
        except KafkaException as error:
            self._fail(error.args[0])
        except TransactionAbortedError:
            self.abort()
            raise
        self._reset()

    def _bounded(self, call: Callable[[], T], timeout_s: float) -> T:
        """Run one blocking transactional call with a hard bound. librdkafka's transactional calls
        can block far past their own timeout when the coordinator went away and came back
        (librdkafka issues #3779 and #5511; seen here with a one-broker restart). A call still
        blocked `_GRACE_S` after its timeout gives this producer up (`ProducerFencedError`): the
        worker starts a producer with the same transactional id, which fences this one on the
        coordinator (its transaction is completed or aborted there, never both), and reloads the
        committed positions. The blocked thread is a daemon and dies with the process."""
        outcome: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                outcome.append(call())
            except BaseException as error:
                failure.append(error)

        thread = threading.Thread(target=run, name="kafka-transaction-call", daemon=True)
        thread.start()
        end = time.monotonic() + timeout_s + _GRACE_S
        while True:
            thread.join(_SERVE_EVERY_S)
            if not thread.is_alive() or time.monotonic() >= end:
                break
            # The call may block for its whole timeout: meanwhile the statistics that tell /readyz
            # Kafka is out of reach are only delivered by polling.
            self._producer.poll(0)
        if thread.is_alive():
            self._stuck = True
            self._reset()
            raise ProducerFencedError(f"a Kafka transaction call blocked for more than {timeout_s + _GRACE_S:.0f} s")
        if failure:
            raise failure[0]
        return outcome[0]

    def _retrying(self, call: Callable[[], object], deadline: float) -> None:
        """librdkafka asks for a call that failed with a retriable error to be repeated; for a
        commit that is the only safe answer (it may have reached the coordinator already, and an
        abort then could not undo it). Past the deadline the outcome is unknown: the producer is
        given up (`ProducerFencedError`) and the worker reloads what was committed."""
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or error.txn_requires_abort() or not error.retriable():
                    raise
                if time.monotonic() >= deadline:
                    self._reset()
                    raise ProducerFencedError(f"transaction outcome unknown after {error.str()}") from None
                log.warning("transactional call failed, retrying", error=error.str())
                time.sleep(0.2)

    def _fail(self, error: KafkaError) -> None:
        """Fatal: the producer is dead (fenced by a newer one with the same transactional id, or
        its transaction timed out on the coordinator). Anything else: abort; a lost group
        generation (a zombie) lands here and only its own transaction is undone."""
        log.warning("transaction failed", error=error.str(), fatal=error.fatal(),
                    group_fenced=error.code() in _GROUP_FENCED)
        if error.fatal():
            self._reset()
            raise ProducerFencedError(error.str())
        self.abort()
        raise TransactionAbortedError(error.str())

    def abort(self, timeout_s: float = TRANSACTION_TIMEOUT_MS / 1000) -> None:
        """Abort the open transaction. An abort that times out keeps running inside librdkafka
        and must be called again to finish; one that cannot finish leaves the producer unusable
        (`ProducerFencedError`: replace it, the replacement's fencing ends the transaction)."""
        if self._open:
            deadline = time.monotonic() + timeout_s
            try:
                self._retrying(lambda: self._bounded(lambda: self._producer.abort_transaction(timeout_s), timeout_s),
                               deadline)
            except KafkaException as error:
                log.warning("abort failed", error=error.args[0].str())
                self._reset()
                raise ProducerFencedError(f"abort failed: {error.args[0].str()}") from None
        self._reset()

    def _reset(self) -> None:
        self._open = False
        self._delivery_error = None
        self.records_in_transaction = 0

    def queue_length(self) -> int:
        return len(self._producer)

    def close(self, timeout_s: float = 10.0) -> None:
        if self._stuck:
            return  # its calls block: a flush would too
        deadline = time.monotonic() + timeout_s
        if self._open:
            with contextlib.suppress(ProducerFencedError):  # a dead producer has nothing left to abort
                self.abort(max(0.1, deadline - time.monotonic()))
        self._producer.flush(max(0.1, deadline - time.monotonic()))
