"""Errors of the CDC source and the map from driver exceptions to what the reader does.

Every cassandra-driver exception is sorted into TRANSIENT (retry with backoff, resume where the
read stopped), TABLE_MISSING (retry for a bounded time, then fail) or FATAL (fail the group with
one clear message). `tests/unit/scylla/test_errors.py` fails when a driver exception class is
not mapped, so a driver upgrade cannot add an unclassified error silently.
"""

from __future__ import annotations

from enum import Enum

from cassandra import (
    AlreadyExists,
    AuthenticationFailed,
    CoordinationFailure,
    DependencyException,
    DriverException,
    FunctionFailure,
    InvalidRequest,
    OperationTimedOut,
    ReadFailure,
    ReadTimeout,
    RequestExecutionException,
    RequestValidationException,
    Timeout,
    Unauthorized,
    Unavailable,
    UnsupportedOperation,
    WriteFailure,
    WriteTimeout,
)
from cassandra.cluster import NoHostAvailable, QueryExhausted, UserTypeDoesNotExist
from cassandra.connection import (
    ConnectionBusy,
    ConnectionException,
    ConnectionShutdown,
    ProtocolError,
    ProtocolVersionUnsupported,
)
from cassandra.pool import NoConnectionsAvailable
from cassandra.protocol import (
    ConfigurationException,
    ErrorMessage,
    InternalError,
    IsBootstrappingErrorMessage,
    NotSupportedError,
    OverloadedErrorMessage,
    ProtocolException,
    ServerError,
    SyntaxException,
    TruncateError,
    UnauthorizedErrorMessage,
)
from cassandra.query import TraceUnavailable
from cassandra.segment import CrcException


class SourceError(Exception):
    """Root of the CDC source's errors."""


class SchemaError(SourceError):
    """A table's schema cannot be loaded, or a log row does not match it."""


class TableMissingError(SchemaError):
    """The table does not exist."""


class MalformedLogError(SourceError):
    """Log rows that break the CDC log format (a record without its end-of-batch row, rows out
    of order); the message names the table, stream, `cdc$time` and sequence number."""


class ReaderFailedError(SourceError):
    """A group, or discovery for a table, cannot go on (bad credentials, missing table after
    the bounded wait, malformed log rows)."""


class ErrorKind(Enum):
    TRANSIENT = "transient"
    TABLE_MISSING = "table_missing"
    FATAL = "fatal"


# Order matters: the first class an exception is an instance of decides.
_KIND_BY_CLASS: tuple[tuple[type[BaseException], ErrorKind], ...] = (
    (AuthenticationFailed, ErrorKind.FATAL),
    (Unauthorized, ErrorKind.FATAL),
    (UnauthorizedErrorMessage, ErrorKind.FATAL),
    (SyntaxException, ErrorKind.FATAL),
    (ConfigurationException, ErrorKind.FATAL),
    (AlreadyExists, ErrorKind.FATAL),
    (UserTypeDoesNotExist, ErrorKind.FATAL),
    (ProtocolVersionUnsupported, ErrorKind.FATAL),
    (UnsupportedOperation, ErrorKind.FATAL),
    (FunctionFailure, ErrorKind.FATAL),
    (DependencyException, ErrorKind.FATAL),
    (NotSupportedError, ErrorKind.FATAL),
    (TraceUnavailable, ErrorKind.FATAL),
    (QueryExhausted, ErrorKind.TRANSIENT),  # every host of the query plan failed
    (NoConnectionsAvailable, ErrorKind.TRANSIENT),
    (CrcException, ErrorKind.TRANSIENT),  # a corrupted frame: the retry reads it again
    (InternalError, ErrorKind.TRANSIENT),
    (InvalidRequest, ErrorKind.FATAL),  # refined to TABLE_MISSING by its message below
    (RequestValidationException, ErrorKind.FATAL),
    (OperationTimedOut, ErrorKind.TRANSIENT),
    (ReadTimeout, ErrorKind.TRANSIENT),
    (WriteTimeout, ErrorKind.TRANSIENT),
    (Timeout, ErrorKind.TRANSIENT),
    (Unavailable, ErrorKind.TRANSIENT),
    (ReadFailure, ErrorKind.TRANSIENT),
    (WriteFailure, ErrorKind.TRANSIENT),
    (CoordinationFailure, ErrorKind.TRANSIENT),
    (OverloadedErrorMessage, ErrorKind.TRANSIENT),
    (IsBootstrappingErrorMessage, ErrorKind.TRANSIENT),
    (TruncateError, ErrorKind.TRANSIENT),
    (ServerError, ErrorKind.TRANSIENT),
    (ProtocolException, ErrorKind.TRANSIENT),
    (RequestExecutionException, ErrorKind.TRANSIENT),
    (ConnectionBusy, ErrorKind.TRANSIENT),
    (ConnectionShutdown, ErrorKind.TRANSIENT),
    (ConnectionException, ErrorKind.TRANSIENT),
    (ProtocolError, ErrorKind.TRANSIENT),
    (NoHostAvailable, ErrorKind.TRANSIENT),  # refined by its per-host errors below
    (ErrorMessage, ErrorKind.TRANSIENT),
    (DriverException, ErrorKind.TRANSIENT),
    (ConnectionError, ErrorKind.TRANSIENT),
    (TimeoutError, ErrorKind.TRANSIENT),
)

_MISSING_TABLE_MARKERS = ("unconfigured table", "unconfigured columnfamily", "does not exist")
# The driver could not decode a value of the answer (a type it reads wrongly or a corrupt cell):
# reading the same rows again gives the same error, so it is no transient DriverException.
_DECODE_FAILURE = "failed decoding result column"


def classify(error: BaseException) -> ErrorKind:
    """What the reader does about `error`; anything not from the driver or the network is FATAL."""
    if isinstance(error, NoHostAvailable):
        inner = [classify(e) for e in (error.errors or {}).values() if isinstance(e, BaseException)]
        return ErrorKind.FATAL if ErrorKind.FATAL in inner else ErrorKind.TRANSIENT
    if isinstance(error, InvalidRequest | ConfigurationException):
        text = str(error).lower()
        if any(marker in text for marker in _MISSING_TABLE_MARKERS):
            return ErrorKind.TABLE_MISSING
    if isinstance(error, DriverException) and _DECODE_FAILURE in str(error).lower():
        return ErrorKind.FATAL
    for cls, kind in _KIND_BY_CLASS:
        if isinstance(error, cls):
            return kind
    return ErrorKind.FATAL


def describe(error: BaseException) -> str:
    """One line: the exception class and its message."""
    text = str(error).strip().replace("\n", " ")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
