"""Errors of the emulator. One root, so callers can catch everything the emulator raises."""

from __future__ import annotations


class SimError(Exception):
    """Root of every error the emulator raises on purpose."""


class CqlSyntaxError(SimError):
    """CQL text that cannot be tokenized or parsed; the message names the position."""


class UnsupportedCqlError(SimError):
    """Valid CQL that lies outside the subset the emulator implements; names the unsupported part."""


class InvalidRequestError(SimError):
    """What ScyllaDB would answer with an `InvalidRequest` error; the message is ScyllaDB's text."""


class ServerError(SimError):
    """What ScyllaDB would answer with a server error (an internal `std::runtime_error`)."""


class ConfigurationError(SimError):
    """A bad emulator setting (the message names the setting)."""
