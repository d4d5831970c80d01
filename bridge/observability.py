"""Logging set-up: structlog, JSON lines when stdout is not a terminal (containers, tests),
readable columns on a terminal. Keys that look like secrets are masked whatever logs them."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_HINTS = ("password", "secret", "token", "credential")


def _mask_secrets(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in event:
        if any(hint in key.lower() for hint in _SECRET_HINTS):
            event[key] = "**********"
    return event


def configure_logging(json: bool | None = None, level: int = logging.INFO) -> None:
    as_json = not sys.stdout.isatty() if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
