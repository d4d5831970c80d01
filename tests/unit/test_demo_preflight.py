"""`cdc-bridge demo` with the stack down: one line that names the silent services and the command
that starts them, instead of a Kafka client's traceback."""

from __future__ import annotations

import argparse

import pytest

from bridge_devstack.cli import demo
from bridge_devstack.stack.layout import Endpoints
from bridge_devstack.stack.process import port_open


def test_the_stack_down_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    offset = next(o for o in range(41_000, 50_000, 97)
                  if not any(port_open("127.0.0.1", p) for p in (9092 + o, 9042 + o)))
    monkeypatch.setenv("CDC_BRIDGE_STACK_PORT_OFFSET", str(offset))
    endpoints = Endpoints.from_env()
    assert demo._handler(argparse.Namespace()) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: the local stack is not running (Kafka 127.0.0.1:{endpoints.kafka_port}, Cassandra"
        f" 127.0.0.1:{endpoints.cassandra_port} do not answer): start it with `cdc-bridge stack up`"
        " (or run scripts/demo, which does)"
    )
