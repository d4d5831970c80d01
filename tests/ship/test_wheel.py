"""The product ships alone (issue 44): its wheel, built from a copy of this checkout as
`pip install .` builds it, holds the product's modules and `cdc-bridge` only; the development
distribution (devstack/: the emulator, the local stack, the test twins, the demo) is not in it
and the images' build context never sees devstack/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.ship.tools import REPO

pytestmark = pytest.mark.slow

_NOT_SHIPPED = re.compile(r"(^|/)(bridge_devstack|sim|stack|testing|devstack)(/|\.py$)|(^|/)spark_demo\.py$|"
                          r"^bridge/cli/(sim|stack|demo)\.py$|^bridge/spark/demo\.py$")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The product's wheel, built from a clean copy of the checkout (devstack/ included, as in a
    clone: the product's package discovery must leave it out), never from a stale build/ folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".stack", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"))
    assert (source / "devstack" / "bridge_devstack").is_dir()
    out = tmp / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out),
                           str(source)], capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [built] = out.glob("scylla_cdc_bridge-*.whl")
    return built


def test_the_wheel_holds_no_emulator_stack_twins_or_demo(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    modules = [n for n in names if ".dist-info/" not in n]
    assert any(n == "bridge/cli/__init__.py" for n in modules) and any(n.startswith("bridge/spark/") for n in modules)
    assert {n.split("/")[0] for n in modules} == {"bridge"}
    assert [n for n in modules if _NOT_SHIPPED.search(n)] == []
    assert "bridge/spark/core/log4j2.properties" in modules  # a local Spark session's log settings (spark_log.py)


def test_the_wheels_entry_points_are_the_products_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [entry_points] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points).decode()
    sections = re.findall(r"^\[([^\]]+)\]$", text, flags=re.M)
    assert sections == ["console_scripts"], text
    assert re.findall(r"^(\S+) = (\S+)$", text, flags=re.M) == [("cdc-bridge", "bridge.cli:main")]
    assert "bridge_devstack" not in text and "cdc_bridge.commands" not in text


def test_the_product_names_no_command_of_the_development_distribution() -> None:
    from bridge.cli import _COMMANDS

    assert not {"stack", "sim", "demo"} & set(_COMMANDS)
    assert not any(module.startswith("bridge_devstack") for module in _COMMANDS.values())


def test_the_images_build_context_and_copies_leave_devstack_out() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore and not [line for line in ignore if "devstack" in line]
    copies = [line.split() for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    sources = {word for words in copies for word in words[1:-1] if not word.startswith("--")}
    assert sources == {"deploy/docker/", "pyproject.toml", "README.md", "bridge/", "/opt/venv", "/opt/ivy"}, sources
