"""Errors of the envelope layer: one root, one class per kind of failure."""

from __future__ import annotations


class EnvelopeError(Exception):
    """Root of every error raised by `bridge.envelope`."""


class PlanError(EnvelopeError):
    """A table schema that cannot be turned into a translation plan (e.g. a name clash)."""


class ValueConversionError(EnvelopeError):
    """A driver value that does not fit its column type; `translate` adds where it happened."""


class TranslationError(EnvelopeError):
    """A change record that cannot be translated. The message names the table, stream, `cdc$time`,
    batch sequence number and, when known, the column."""


class UnknownColumnError(TranslationError):
    """A log row carries a column the plan's table schema does not have (added after the plan
    was built): translate again with the table's current schema."""

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column


class SerializationError(EnvelopeError):
    """A Connect value or schema that a serializer cannot write."""


class SettingsError(EnvelopeError):
    """A bad value for one of the translator's settings; the message names the property."""
