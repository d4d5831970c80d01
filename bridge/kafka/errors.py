"""Errors of the Kafka side. Each says what failed in one line; the worker decides what follows."""

from __future__ import annotations


class KafkaSideError(Exception):
    """Root of the Kafka side's errors."""


class KafkaSettingError(KafkaSideError):
    """Kafka (or a topic in it) refuses this configuration for good: `key` is the setting to fix,
    `reason` says why and what to do; start-up prints both as one line."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class KafkaUnavailableError(KafkaSideError):
    """Kafka did not answer (or a topic is missing) within the bound: start-up stops."""


class TransactionAbortedError(KafkaSideError):
    """The open transaction was aborted; its records must be read again from the last commit."""


class ProducerFencedError(TransactionAbortedError):
    """Another producer or group generation took over: this producer cannot commit any more."""
