"""The container image's hashed dependency locks (deploy/docker, scripts/lock-image) follow
pyproject.toml: a dependency added or re-pinned without them fails here, where every landing
runs it (the image itself is checked in tests/ship)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "deploy" / "docker"
REGENERATE = "run scripts/lock-image"


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _lock_pins(lock: Path) -> dict[str, list[str]]:
    """name -> pinned versions (a package may have one pin per Python version marker)."""
    pins: dict[str, list[str]] = {}
    text = lock.read_text()
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = entry.split("\\", 1)[0].strip()
        if not head or head.startswith("#"):
            continue
        match = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", head)
        assert match, f"{lock.name}: {head!r} is not pinned with =="
        assert "--hash=sha256:" in entry, f"{lock.name}: {match[1]} has no hash"
        pins.setdefault(match[1].lower().replace("_", "-"), []).append(match[2])
    return pins


@pytest.mark.parametrize(("lock_name", "extras"), [("requirements.lock", []), ("requirements-spark.lock", ["spark"])])
def test_locks_satisfy_pyproject(lock_name: str, extras: list[str]) -> None:
    """Every dependency pyproject.toml declares is pinned, with hashes, at a version it allows."""
    project = _pyproject()["project"]
    declared = list(project["dependencies"])
    for extra in extras:
        declared += project["optional-dependencies"][extra]
    pins = _lock_pins(LOCKS / lock_name)
    for text in declared:
        requirement = Requirement(text)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{lock_name} lacks {name}; {REGENERATE}"
        assert any(requirement.specifier.contains(v, prereleases=True) for v in pins[name]), \
            f"{lock_name} pins {name}=={pins[name]}, pyproject wants {requirement.specifier}; {REGENERATE}"
    if not extras:
        assert "pyspark" not in pins, "the worker image must not carry Spark"
