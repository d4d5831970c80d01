"""Errors of the Spark job: one root, one class per kind of failure."""

from __future__ import annotations


class SparkJobError(Exception):
    """Root of every error raised by `bridge.spark`: a bad option or input, named in the message."""


class BadEnvelopeError(SparkJobError):
    """A record that cannot be read as what its topic should hold (message names topic, partition, offset)."""


class KafkaSinkError(SparkJobError):
    """The transactional Kafka output failed; the micro-batch fails and is retried from the checkpoint."""
