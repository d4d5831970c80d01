"""Errors of the Kafka side. Each says what failed in one line; the worker decides what follows."""

from __future__ import annotations


class KafkaSideError(Exception):
    """Root of the Kafka side's errors."""


class KafkaUnavailableError(KafkaSideError):
    """Kafka did not answer (or a topic is missing) within the bound: start-up stops."""


class TransactionAbortedError(KafkaSideError):
    """The open transaction was aborted; its records must be read again from the last commit."""


class ProducerFencedError(TransactionAbortedError):
    """Another producer or group generation took over: this producer cannot commit any more."""
