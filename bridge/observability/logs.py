"""Logging set-up: structlog, JSON lines when stdout is not a terminal (containers, tests),
readable columns on a terminal.

Secrets never reach a log line, whoever logs them: a processor masks the value of every key that
looks like a secret (at any depth of nested maps and lists), and every secret value registered
with `register_secret` (the passwords the process was configured with) is masked wherever it
appears inside any string, so a driver error that echoes a password cannot leak it either.
Standard-library logging (the Cassandra driver's warnings) is routed through the same chain.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

MASK = "**********"
_SECRET_HINTS = ("password", "passwd", "secret", "token", "credential", "private_key", "privatekey",
                 "sasl.jaas", "ssl.key.pem", "api_key", "apikey")
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
# Shortest value treated as a secret inside other strings: a one- or two-letter "password"
# would otherwise mask innocent words everywhere.
_MIN_SECRET_LENGTH = 3


# Fields every line of this process carries (a supervised worker process's index): set once at
# start. Not structlog's contextvars, which a thread started later (the reader's, the driver's)
# would not see.
_process_fields: dict[str, Any] = {}


def bind_process_fields(**fields: Any) -> None:
    """Add `fields` to every later log line of this process, from any thread."""
    _process_fields.update(fields)


def _add_process_fields(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in _process_fields.items():
        event.setdefault(key, value)
    return event


def register_secret(value: str | None) -> None:
    """Mask `value` wherever it appears in any later log line."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _secrets_lock:
            _secrets.add(value)


def forget_secrets() -> None:
    """For tests: drop every registered secret value."""
    with _secrets_lock:
        _secrets.clear()


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(hint in lowered for hint in _SECRET_HINTS)


def mask_text(text: str) -> str:
    """`text` with every registered secret value replaced by the mask."""
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)  # longest first: one secret may contain another
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {k: MASK if isinstance(k, str) and is_secret_key(k) else _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_masked(item) for item in value]
    if isinstance(value, BaseException):
        return mask_text(str(value))
    return value


def mask_secrets(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: secret-looking keys masked, registered secret values masked anywhere."""
    for key in list(event):
        event[key] = MASK if is_secret_key(key) else _masked(event[key])
    return event


def _mask_rendered(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """After `format_exc_info`: a traceback is text built from exception messages."""
    exception = event.get("exception")
    if isinstance(exception, str):
        event["exception"] = mask_text(exception)
    return event


class _LineLogger:
    """Prints whole lines; `before_line` lets a terminal progress line step aside first."""

    # One lock for every logger of the process: each module's logger is its own _LineLogger, and
    # lines written from several threads at once must not interleave.
    _lock = threading.Lock()

    def __init__(self, file: TextIO, before_line: Callable[[], Any] | None, name: str = "") -> None:
        self._file = file
        self._before_line = before_line
        self.name = name  # the module's name given to structlog.get_logger (run-time levels)

    def msg(self, message: str) -> None:
        with _LineLogger._lock:
            if self._before_line is not None:
                self._before_line()
            # One write per line: with PYTHONUNBUFFERED (our image sets it) print() issues the
            # message and its newline as two writes, and worker processes sharing one stdout
            # would interleave between them.
            self._file.write(message + "\n")
            self._file.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = failure = msg


# Levels set at run time by logger name (the REST API's PUT /admin/loggers/{logger}): a name covers
# its children ("bridge.worker" covers "bridge.worker.loop"), "root" every logger. Empty, the
# default: nothing is filtered beyond the start level. Lines below the start level are dropped before
# any processor runs, so a run-time level only raises the bar (DEBUG needs a start at DEBUG).
_RUN_TIME_LEVELS: dict[str, int] = {}
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
                  "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
                  "fatal": logging.CRITICAL}


def set_run_time_level(name: str, level: int) -> None:
    _RUN_TIME_LEVELS[name] = level


def run_time_levels() -> dict[str, int]:
    return dict(_RUN_TIME_LEVELS)


def _run_time_level(logger: Any, method_name: str, event_dict: Any) -> Any:
    if _RUN_TIME_LEVELS:
        name = str(getattr(logger, "name", ""))
        while name not in _RUN_TIME_LEVELS and name:
            name = name.rpartition(".")[0]
        level = _RUN_TIME_LEVELS.get(name or "root")
        if level is not None and _METHOD_LEVELS.get(method_name, logging.INFO) < level:
            raise structlog.DropEvent
    return event_dict


class _ToStructlog(logging.Handler):
    """Standard-library records (the Cassandra driver's) into structlog, one line each."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = structlog.get_logger(record.name)
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            logger.error(message, logger=record.name)
        elif record.levelno >= logging.WARNING:
            logger.warning(message, logger=record.name)
        else:
            logger.info(message, logger=record.name)


def configure_logging(
    json: bool | None = None,
    level: int = logging.INFO,
    *,
    file: TextIO | None = None,
    before_line: Callable[[], Any] | None = None,
) -> None:
    """structlog to `file` (stdout): JSON when it is not a terminal (or `json` says so),
    human-readable columns on a terminal. `before_line` runs before each line is written (the
    progress line clears itself there)."""
    out = file if file is not None else sys.stdout
    as_json = not out.isatty() if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            _run_time_level,
            structlog.contextvars.merge_contextvars,
            _add_process_fields,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            mask_secrets,
            structlog.processors.format_exc_info,
            _mask_rendered,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *args: _LineLogger(out, before_line, str(args[0]) if args else ""),
        cache_logger_on_first_use=True,
    )
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ToStructlog)]:
        root.removeHandler(handler)
    root.addHandler(_ToStructlog(logging.WARNING))
