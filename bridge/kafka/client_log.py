"""librdkafka's own log lines, routed into structlog (stdout, JSON in containers) instead of raw
lines on stderr, so a failing start-up leaves exactly one error line there."""

from __future__ import annotations

import logging
from typing import Any

import structlog

_log = structlog.get_logger("librdkafka")


class _ToStructlog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            _log.error(record.getMessage())
        elif record.levelno >= logging.WARNING:
            _log.warning(record.getMessage())
        else:
            _log.info(record.getMessage())


def client_logger() -> logging.Logger:
    """The `logger` to give every confluent-kafka client."""
    logger = logging.getLogger("bridge.librdkafka")
    if not logger.handlers:
        logger.addHandler(_ToStructlog())
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def with_logger(config: dict[str, str]) -> dict[str, Any]:
    return {**config, "logger": client_logger()}
