"""deploy/kubernetes/spark-jobs.yaml without a cluster: every manifest valid (built-in kinds against
the Kubernetes API's schemas, the SparkApplications against the Spark operator's own CRD, both
strict: an unknown field fails), and the two jobs the documented commands the image can run."""

from __future__ import annotations

import copy
import re
from pathlib import PurePosixPath
from typing import Any

import jsonschema
import pytest
import yaml

from tests.ship.k8s import KUBERNETES_VERSIONS, validate
from tests.ship.tools import REPO

MANIFEST = REPO / "deploy" / "kubernetes" / "spark-jobs.yaml"
JOBS = {"cdc-bridge-flatten": "flatten", "cdc-bridge-mirror": "mirror"}
# What the jobs rely on in a SparkApplication, whatever the CRD's version allows besides: a Python
# job of the spark image in cluster mode, the packages, a driver allowed to create its executors.
_REQUIRED = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "sparkoperator.k8s.io/v1beta2"},
        "kind": {"const": "SparkApplication"},
        "spec": {
            "type": "object",
            "required": ["type", "mode", "image", "mainApplicationFile", "arguments", "sparkVersion", "deps",
                         "sparkConf", "restartPolicy", "driver", "executor"],
            "properties": {
                "type": {"const": "Python"},
                "mode": {"const": "cluster"},
                "image": {"type": "string", "pattern": r"^[\w./-]+-spark:\d+\.\d+\.\d+$"},
                "mainApplicationFile": {"type": "string", "pattern": "^local:///"},
                "arguments": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "deps": {"type": "object", "required": ["packages"]},
                "driver": {"type": "object", "required": ["cores", "memory", "serviceAccount"]},
                "executor": {"type": "object", "required": ["instances", "cores", "memory"]},
            },
        },
    },
}


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return [m for m in yaml.safe_load_all(MANIFEST.read_text()) if m]


def _apps(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == "SparkApplication"}


@pytest.mark.parametrize("kubernetes_version", KUBERNETES_VERSIONS)
def test_every_manifest_passes_schema_validation(manifests: list[dict[str, Any]], kubernetes_version: str) -> None:
    assert sorted(m["kind"] for m in manifests) == ["PersistentVolumeClaim", "Role", "RoleBinding",
                                                    "ServiceAccount", "SparkApplication", "SparkApplication"]
    for manifest in manifests:
        validate(manifest, kubernetes_version)


def test_the_spark_applications_have_what_the_jobs_need(manifests: list[dict[str, Any]]) -> None:
    for app in _apps(manifests).values():
        jsonschema.validate(app, _REQUIRED)
    broken = copy.deepcopy(next(iter(_apps(manifests).values())))
    del broken["spec"]["deps"]
    with pytest.raises(jsonschema.ValidationError, match="deps"):
        jsonschema.validate(broken, _REQUIRED)
    unknown = copy.deepcopy(broken) | {"spec": {**broken["spec"], "deps": {"packages": []}, "drivr": {}}}
    with pytest.raises(AssertionError, match="drivr"):
        validate(unknown, KUBERNETES_VERSIONS[-1])


def test_the_jobs_are_the_documented_commands_on_the_image(manifests: list[dict[str, Any]]) -> None:
    """Arguments that `python -m bridge.spark` parses, the packages `cdc-bridge spark packages`
    prints (and the image's Ivy cache holds), the image's Python and the project's version."""
    from importlib import metadata

    from bridge.cli import build_parser
    from bridge.spark.core.session import packages

    apps = _apps(manifests)
    assert set(apps) == set(JOBS)
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    minor = re.search(r"^ARG PYTHON_MINOR=(\S+)", (REPO / "Dockerfile").read_text(), re.M)
    assert version is not None and minor is not None
    checkpoints = set()
    for name, job in JOBS.items():
        spec = apps[name]["spec"]
        args = build_parser().parse_args(["spark", *spec["arguments"]])
        assert args.spark_command == job
        checkpoints.add(args.checkpoint)
        assert spec["image"].endswith(f"-spark:{version[1]}")
        assert spec["mainApplicationFile"] == (f"local:///opt/venv/lib/python{minor[1]}/site-packages/"
                                               "bridge/spark/__main__.py")
        assert spec["deps"]["packages"] == packages()
        assert spec["sparkVersion"] == metadata.version("pyspark")
        conf = spec["sparkConf"]
        assert conf["spark.jars.ivy"] == "/opt/ivy", "the image's Ivy cache (CDC_BRIDGE_IVY_DIR)"
        mounts = {conf[f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.data.mount.path"]
                  for role in ("driver", "executor")}
        assert mounts == {"/data"}, "driver and executors see the same checkpoint and Delta tables"
        assert PurePosixPath(args.checkpoint).is_relative_to("/data")
        if job == "mirror":
            assert PurePosixPath(args.delta).is_relative_to("/data")
        for role in ("driver", "executor"):
            assert spec[role]["securityContext"]["runAsNonRoot"] is True
    assert len(checkpoints) == len(JOBS), "one checkpoint per job"


def test_the_driver_may_create_its_executors(manifests: list[dict[str, Any]]) -> None:
    by_kind = {m["kind"]: m for m in manifests}
    account = by_kind["ServiceAccount"]["metadata"]["name"]
    for app in _apps(manifests).values():
        assert app["spec"]["driver"]["serviceAccount"] == account
        claim = app["spec"]["sparkConf"]["spark.kubernetes.driver.volumes.persistentVolumeClaim.data.options.claimName"]
        assert claim == by_kind["PersistentVolumeClaim"]["metadata"]["name"]
    binding = by_kind["RoleBinding"]
    assert binding["roleRef"]["name"] == by_kind["Role"]["metadata"]["name"]
    namespaces = {m["metadata"]["namespace"] for m in manifests}
    assert len(namespaces) == 1, "one namespace for the jobs, their account and their volume"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespaces.pop()}]
    assert {"pods", "services", "configmaps"} <= set(by_kind["Role"]["rules"][0]["resources"])
    assert by_kind["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteMany"]
