"""Log lines: JSON off a terminal, secrets masked by key and by value wherever they appear."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from bridge.observability.logs import MASK, configure_logging, forget_secrets, register_secret


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging(json=True, file=out)
    try:
        yield out
    finally:
        forget_secrets()
        structlog.reset_defaults()
        root = logging.getLogger()
        for handler in list(root.handlers):
            if type(handler).__name__ == "_ToStructlog":
                root.removeHandler(handler)


def events(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_secret_looking_keys_are_masked_at_any_depth(lines: io.StringIO) -> None:
    structlog.get_logger("t").info("connecting", password="hunter22", user="alice",
                                   config={"sasl.password": "s3cr3t!", "bootstrap.servers": "k:9092",
                                           "nested": [{"ssl.key.password": "kp-123"}]})
    (event,) = events(lines)
    assert event["password"] == MASK and event["user"] == "alice"
    config = event["config"]
    assert isinstance(config, dict)
    assert config["sasl.password"] == MASK and config["bootstrap.servers"] == "k:9092"
    assert config["nested"] == [{"ssl.key.password": MASK}]
    assert "hunter22" not in lines.getvalue() and "s3cr3t!" not in lines.getvalue()


def test_registered_secret_values_are_masked_inside_any_text(lines: io.StringIO) -> None:
    register_secret("Tr0ub4dor&3")
    register_secret("ab")  # too short to mask inside other words
    log = structlog.get_logger("t")
    log.error("login failed", error="Authentication failed for user bob with password Tr0ub4dor&3",
              items=["x Tr0ub4dor&3 y"])
    try:
        raise RuntimeError("bad credentials Tr0ub4dor&3")
    except RuntimeError:
        log.exception("boom")
    text = lines.getvalue()
    assert "Tr0ub4dor&3" not in text
    first, second = events(lines)
    assert first["error"] == f"Authentication failed for user bob with password {MASK}"
    assert first["items"] == [f"x {MASK} y"]
    assert "RuntimeError" in str(second["exception"]) and MASK in str(second["exception"])
    structlog.get_logger("t").info("about a cab")  # the short registered value masks nothing
    assert events(lines)[-1]["event"] == "about a cab"


def test_standard_logging_warnings_go_through_the_same_chain(lines: io.StringIO,
                                                             request: pytest.FixtureRequest) -> None:
    driver = logging.getLogger("cassandra")  # a stack readiness probe earlier in the run may have silenced it
    request.addfinalizer(lambda level=driver.level: driver.setLevel(level))
    driver.setLevel(logging.NOTSET)
    register_secret("pw-in-driver-msg")
    logging.getLogger("cassandra.cluster").warning("could not connect with pw-in-driver-msg")
    logging.getLogger("cassandra.cluster").info("below the threshold")
    (event,) = events(lines)
    assert event["level"] == "warning" and event["logger"] == "cassandra.cluster"
    assert event["event"] == f"could not connect with {MASK}"


def test_a_terminal_gets_readable_lines_and_the_hook_runs_first() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    calls: list[int] = []
    configure_logging(file=out, before_line=lambda: calls.append(len(out.getvalue())))
    try:
        structlog.get_logger("t").info("hello", table="ks.t")
    finally:
        structlog.reset_defaults()
    text = out.getvalue()
    assert not text.startswith("{") and "hello" in text and "table" in text
    assert calls == [0]


class _Writes(io.StringIO):
    """Records each write call: what reaches the file descriptor as one write(2) when unbuffered."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_line_is_one_write_so_processes_sharing_stdout_never_interleave() -> None:
    out = _Writes()
    configure_logging(json=True, file=out)
    try:
        structlog.get_logger("t").info("first", worker_process=0)
        structlog.get_logger("t").info("second", worker_process=1)
    finally:
        structlog.reset_defaults()
    assert len(out.calls) == 2 and all(call.endswith("\n") and call.count("\n") == 1 for call in out.calls)
    assert [json.loads(call)["event"] for call in out.calls] == ["first", "second"]
