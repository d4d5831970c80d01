"""Rendering the Helm chart with a real helm, and validating what it renders without a cluster:
built-in kinds against the Kubernetes API's JSON schemas (kubernetes-validate, strict: unknown
fields fail), custom resources against the openAPIV3Schema of their CRDs as the operators ship
them (made strict the same way)."""

from __future__ import annotations

import copy
import functools
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.ship.tools import PROMETHEUS_OPERATOR, REPO, SPARK_OPERATOR, go_module, helm

CHART = REPO / "helm" / "scylla-cdc-bridge"
# The oldest and the newest Kubernetes minor the chart is checked against (Chart.yaml annotation).
KUBERNETES_VERSIONS = ("1.30", "1.37")
_CRD_FILES = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"):
        (PROMETHEUS_OPERATOR, "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"),
    ("monitoring.coreos.com/v1", "PodMonitor"):
        (PROMETHEUS_OPERATOR, "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml"),
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"):
        (SPARK_OPERATOR, "config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml"),
}


@dataclass(frozen=True)
class Rendered:
    manifests: list[dict[str, Any]]
    text: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    @property
    def kinds(self) -> list[str]:
        return sorted(m["kind"] for m in self.manifests)


def run_helm(*args: str, chart: Path = CHART) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm()), *args, str(chart)], capture_output=True, text=True, timeout=120, check=False)


def template(values: Sequence[Path] = (), sets: Sequence[str] = (), release: str = "cdc",
             chart: Path = CHART) -> Rendered:
    args = ["template", release, "--namespace", "data"]
    for path in values:
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run([str(helm()), *args[:2], str(chart), *args[2:]], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
    manifests = [m for m in yaml.safe_load_all(done.stdout) if m]
    return Rendered(manifests, done.stdout)


def template_error(sets: Sequence[str] = (), values: Sequence[Path] = ()) -> str:
    args = ["template", "cdc"]
    done = subprocess.run([str(helm()), *args, str(CHART), *[f"--values={v}" for v in values],
                           *[f"--set={s}" for s in sets]], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0, f"helm template accepted bad values {sets} {values}"
    return done.stderr


def _strict(schema: Any) -> Any:
    """A structural schema whose objects refuse unknown fields (as `kubectl apply` with strict
    field validation does), unless they declare additionalProperties or preserve unknown fields."""
    if isinstance(schema, dict):
        out = {key: _strict(value) for key, value in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@functools.cache
def _crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    module, path = _CRD_FILES[(api_version, kind)]
    crd = yaml.safe_load((go_module(module) / path).read_text())
    version = api_version.rpartition("/")[2]
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # CRDs declare metadata as a bare object: the API server checks it (names, labels) itself
    schema["properties"]["metadata"] = {"type": "object"}
    return _strict(schema)


def validate(manifest: dict[str, Any], kubernetes_version: str) -> None:
    """Raises with the manifest's kind/name and the first violation."""
    where = f"{manifest.get('kind')}/{manifest.get('metadata', {}).get('name')}"
    key = (manifest.get("apiVersion", ""), manifest.get("kind", ""))
    if key in _CRD_FILES:
        schema = _crd_schema(*key)
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(manifest), key=lambda e: list(e.absolute_path))
        assert not errors, f"{where}: {'/'.join(map(str, errors[0].absolute_path))}: {errors[0].message}"
        return
    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as error:
        raise AssertionError(f"{where} (Kubernetes {kubernetes_version}): "
                             f"{'/'.join(map(str, error.path))}: {error.message}") from None


def notes(sets: Sequence[str] = (), values: Sequence[Path] = (), workdir: Path | None = None) -> str:
    """NOTES.txt as `helm install` would print it (`helm template` leaves it out): rendered from a
    copy of the chart where it is wrapped into a YAML document."""
    assert workdir is not None
    copy_dir = workdir / "chart"
    subprocess.run(["cp", "-r", str(CHART), str(copy_dir)], check=True)
    text = (copy_dir / "templates" / "NOTES.txt").read_text()
    wrapped = "notes: |\n" + "".join(f"  {line}\n" for line in text.splitlines())
    (copy_dir / "templates" / "zz-notes.yaml").write_text(wrapped)
    rendered = template(values, [*sets], chart=copy_dir)
    found = [m for m in rendered.manifests if "notes" in m]
    assert len(found) == 1
    return str(found[0]["notes"])
