"""The `sim` command line: every subcommand has --help, and the parser wires handlers."""

from __future__ import annotations

import argparse
import socket

import pytest

from bridge import cli as top_cli
from bridge_devstack.cli import sim as cli


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cdc-bridge")
    cli.register(top.add_subparsers(dest="command", required=True))
    return top


@pytest.mark.parametrize(
    "words",
    [
        ["sim"],
        ["sim", "exec"],
        ["sim", "bootstrap-node"],
        ["sim", "tablets"],
        ["sim", "tablets", "split"],
        ["sim", "tablets", "merge"],
        ["sim", "tablets", "change"],
        ["sim", "load"],
    ],
)
def test_every_subcommand_has_help(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` prints a usage line for the command and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args([*words, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: cdc-bridge {' '.join(words)}" in capsys.readouterr().out


def test_arguments_reach_the_handlers() -> None:
    """Parsed arguments carry the handler and the options each subcommand needs."""
    args = parser().parse_args(["sim", "tablets", "change", "ks", "t", "--positions", "0,2", "--split", "--delay", "1"])
    assert args.handler is cli._tablets and args.positions == "0,2" and args.split and args.delay == 1.0
    args = parser().parse_args(["sim", "exec", "-f", "x.cql", "--vnodes-keyspace", "meta"])
    assert args.handler is cli._exec and args.file == "x.cql" and cli._settings(args).vnodes_keyspace == "meta"
    with pytest.raises(SystemExit):
        parser().parse_args(["sim", "exec", "UPDATE t SET v = 1 WHERE pk = 1", "-f", "x.cql"])


def test_bad_settings_are_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad keyspace name in a flag stops with one line naming the setting."""
    code = top_cli.main(["sim", "bootstrap-node", "--vnodes-keyspace", "bad-name!"])
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: vnodes_keyspace: 'bad-name!' is not a valid keyspace name"


def _closed_port() -> int:
    """A local port nothing listens on (bound and released: the kernel will not hand it out again at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_script_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert top_cli.main(["sim", "exec", "-f", "/nonexistent/changes.cql"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: -f /nonexistent/changes.cql: cannot read it (No such file or directory)"
    )


def test_no_cassandra_is_one_line_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    """`sim exec` with the stack down: one line naming where it looked and what starts the stack,
    not the driver's NoHostAvailable traceback."""
    port = _closed_port()
    assert top_cli.main(["sim", "exec", "--port", str(port), "INSERT INTO ks.t (pk) VALUES (1)"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: no Cassandra answers at 127.0.0.1:{port}: start the local stack")
    assert "`cdc-bridge stack up`" in error and "\n" not in error
