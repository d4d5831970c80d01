"""Bad settings of the advanced output format (issue 25) stop `cdc-bridge run` and `config check`
with one line and exit 2, before anything starts (no topic is created); a table without the image
option a mode needs is named with the ALTER TABLE that fixes it, as the Java connector's
`CdcTableOptionsValidator` (src/main/java/com/scylladb/cdc/debezium/connector/, HEAD of
scylladb/scylla-cdc-source-connector) refuses it, and that ALTER TABLE does fix it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import CLI, worker_properties, write_properties


def _cli(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout_s, check=False)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _refused(command: str, config: Path, expected: str) -> str:
    result = _cli(command, *(["check"] if command == "config" else []), "--config", str(config))
    errors = _lines(result.stderr)
    assert result.returncode == 2, (command, result.stdout[-2000:], result.stderr[-2000:])
    assert len(errors) == 1, (command, errors)
    assert errors[0].startswith(f"error: {expected}"), (command, errors)
    return errors[0]


def _no_topics_of(kafka_admin: Any, name: str) -> None:
    topics = kafka_admin.list_topics(timeout=15).topics
    assert [t for t in topics if t.startswith(name)] == [], "something started"


@pytest.mark.parametrize(
    ("label", "settings", "expected"),
    [
        ("advanced+preimages", {"cdc.output.format": "advanced", "experimental.preimages.enabled": "true"},
         "experimental.preimages.enabled: must be false with cdc.output.format=advanced (use cdc.include.before)"),
        ("legacy+before", {"cdc.include.before": "full"},
         "cdc.include.before: must be none with cdc.output.format=legacy, not full (set cdc.output.format=advanced)"),
        ("legacy+placement", {"cdc.include.primary-key.placement": "kafka-key"},
         "cdc.include.primary-key.placement: must be kafka-key,payload-after,payload-before with "
         "cdc.output.format=legacy, not kafka-key (set cdc.output.format=advanced)"),
        ("unknown placement", {"cdc.output.format": "advanced", "cdc.include.primary-key.placement": "kafka-value"},
         "cdc.include.primary-key.placement: unknown placement 'kafka-value'; use any of kafka-key, payload-after, "
         "payload-before, payload-key, kafka-headers, payload-diff"),
        ("unknown mode", {"cdc.output.format": "advanced", "cdc.include.after": "changed"},
         "cdc.include.after: must be one of none, full, only-updated"),
        ("unknown format", {"cdc.output.format": "advance"}, "cdc.output.format: must be one of legacy, advanced"),
    ],
)
def test_bad_output_settings_are_one_line_and_start_nothing(
    tmp_path: Path, stack: Endpoints, emulator: Emulator, keyspace: str, kafka_admin: Any, bridge_name: str,
    label: str, settings: dict[str, str], expected: str,
) -> None:
    emulator.execute(f"CREATE TABLE {keyspace}.t (id int PRIMARY KEY, v text) WITH cdc = {{'enabled': true}}")
    config = write_properties(tmp_path / "bad.properties",
                              {**worker_properties(stack, bridge_name, [f"{keyspace}.t"]), **settings})
    for command in ("run", "config"):
        _refused(command, config, expected)
    _no_topics_of(kafka_admin, bridge_name)


def test_a_table_without_the_image_option_is_named_with_its_fix(
    tmp_path: Path, stack: Endpoints, emulator: Emulator, keyspace: str, kafka_admin: Any, bridge_name: str,
) -> None:
    """after=full on a table with only a pre-image: refused by run and config check, naming the
    ALTER TABLE; after that ALTER TABLE both pass. A full pre-image is refused as the connector
    refuses it; a table that does not exist yet is a warning of config check, refused by run as
    every missing table is."""
    table = f"{keyspace}.t"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)"
                     " WITH cdc = {'enabled': true, 'preimage': true}")
    base = {**worker_properties(stack, bridge_name, [table]), "cdc.output.format": "advanced"}
    after_full = write_properties(tmp_path / "after.properties", {**base, "cdc.include.after": "full"})
    expected = (f"cdc.include.after: table {table} has 'postimage': 'false'; full needs 'postimage': true "
                f"(ALTER TABLE {table} WITH cdc = {{'enabled': true, 'preimage': true, 'postimage': true, "
                "'delta': 'full', 'ttl': 86400})")
    for command in ("run", "config"):
        assert _refused(command, after_full, expected) == f"error: {expected}"
    _no_topics_of(kafka_admin, bridge_name)

    emulator.execute(expected[expected.index("(ALTER") + 1:-1])  # the fix, as printed
    checked = _cli("config", "check", "--config", str(after_full))
    assert checked.returncode == 0 and _lines(checked.stderr) == [], checked.stderr

    emulator.execute(f"ALTER TABLE {table} WITH cdc = {{'enabled': true, 'preimage': 'full'}}")
    before_full = write_properties(tmp_path / "before.properties", {**base, "cdc.include.before": "only-updated"})
    _refused("config", before_full, f"cdc.include.before: table {table} has 'preimage': 'full'; only-updated needs "
                                    "'preimage': true (the connector accepts true only, not full) (ALTER TABLE")
    assert _cli("config", "check", "--offline", "--config", str(before_full)).returncode == 0

    emulator.execute(f"ALTER TABLE {table} WITH cdc = {{'enabled': false, 'preimage': true}}")
    _refused("config", before_full, f"cdc.include.before: table {table} has 'enabled': 'false'; only-updated "
                                    "needs 'enabled': true and 'preimage': true (ALTER TABLE")

    missing = write_properties(tmp_path / "missing.properties",
                               {**base, "cdc.include.before": "full", "scylla.table.names": f"{keyspace}.later"})
    checked = _cli("config", "check", "--config", str(missing))
    assert checked.returncode == 0, checked.stderr
    assert _lines(checked.stderr) == [f"warning: scylla.table.names: table {keyspace}.later does not exist (yet); "
                                      "cdc-bridge run refuses it until it does"]
    _refused("run", missing, f"scylla.table.names: table {keyspace}.later does not exist")
