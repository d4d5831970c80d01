"""The container images, checked without a Docker engine: hadolint, the essentials of each target
(pinned bases, non-root, probe, entrypoint, no build tools in the final image), and the install
recipe itself run into a scratch virtualenv. (The locks against pyproject.toml: tests/unit.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.settings import BridgeConfig
from tests.ship.dockerfile import Stage, parse
from tests.ship.tools import REPO, hadolint

DOCKERFILE = REPO / "Dockerfile"
LOCKS = REPO / "deploy" / "docker"
PINNED_PYTHON = re.compile(r"python:3\.\d+\.\d+-slim-(bookworm|trixie)@sha256:[0-9a-f]{64}")
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|build-essential|make|cmake|git|curl|wget)\b")


def _stages() -> dict[str, Stage]:
    _, stages = parse(DOCKERFILE)
    return {stage.name: stage for stage in stages}


def _run_hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hadolint()), "--no-color", "--failure-threshold", "style", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    """Every hadolint rule at every severity; the one inline ignore says why. A bad file fails."""
    done = _run_hadolint(DOCKERFILE)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\n")
    found = _run_hadolint(bad)
    assert found.returncode != 0 and "DL3007" in found.stdout and "DL3008" in found.stdout, found.stdout


def test_every_base_image_is_pinned_by_version_and_digest() -> None:
    """A tag is re-pushed (Debian updates); the digest names exactly one image, the tag says which."""
    stages = _stages()
    for stage in stages.values():
        if stage.base in stages:
            continue  # FROM an earlier stage
        reference, _, digest = stage.base.partition("@")
        image, _, tag = reference.rpartition(":")
        assert image and tag and tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag), \
            f"stage {stage.name}: base {stage.base!r} is not pinned to a full version"
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), f"stage {stage.name}: base {stage.base!r} has no digest"
    for name in ("build", "spark-build", "spark", "worker"):
        assert PINNED_PYTHON.fullmatch(stages[name].base), (name, stages[name].base)


def test_worker_image_is_the_default_non_root_probed_cdc_bridge() -> None:
    _, ordered = parse(DOCKERFILE)
    worker = ordered[-1]
    assert worker.name == "worker", "the worker must be the last stage: the default target of `docker build`"
    user = worker.last("USER")
    assert user is not None and user.arguments.split(":")[0] not in ("root", "0"), "the worker must not run as root"
    assert int(user.arguments.split(":")[0]) >= 10000, "a numeric uid (Kubernetes runAsNonRoot can verify it)"
    entrypoint = worker.last("ENTRYPOINT")
    assert entrypoint is not None and entrypoint.exec_form() == ["cdc-bridge"]
    cmd = worker.last("CMD")
    assert cmd is not None and cmd.exec_form() == ["run", "--config", "/etc/cdc-bridge/worker.properties"]
    port = BridgeConfig.model_fields["metrics_port"].default
    assert [i.arguments for i in worker.all("EXPOSE")] == [str(port)]
    healthcheck = worker.last("HEALTHCHECK")
    assert healthcheck is not None and "/healthz" in healthcheck.arguments
    assert f"'{port}'" in healthcheck.arguments, "the probe's default port is metrics.port's default"
    assert "CDC_BRIDGE_METRICS_PORT" in healthcheck.arguments, "the probe follows metrics.port set by env"


def test_final_images_carry_no_build_tools() -> None:
    """Dependencies come only from the build stages' virtualenv; nothing is compiled or fetched
    in a final stage except the Spark image's JRE."""
    stages = _stages()
    for name in ("worker", "spark"):
        stage = stages[name]
        for run in stage.all("RUN"):
            assert not BUILD_TOOLS.search(run.arguments), f"{name}: {run.arguments}"
            assert "pip install" not in run.arguments, f"{name} installs Python packages itself: {run.arguments}"
        copies = [i.arguments for i in stage.all("COPY")]
        assert copies and all(c.startswith("--from=") for c in copies), f"{name} copies from the context: {copies}"
    assert [c.arguments for c in stages["worker"].all("COPY")] == ["--from=build /opt/venv /opt/venv"]


def test_build_stages_install_only_from_hashed_locks() -> None:
    stages = _stages()
    expected = {"build": "deploy/docker/requirements.lock", "spark-build": "deploy/docker/requirements-spark.lock"}
    for name, lock in expected.items():
        runs = [r.arguments for r in stages[name].all("RUN")]
        assert any(r.startswith(f"deploy/docker/install-venv /opt/venv {lock} /src") for r in runs), runs
        assert not any(re.search(r"pip3? install", r) for r in runs), f"{name} bypasses install-venv: {runs}"
    recipe = (LOCKS / "install-venv").read_text()
    for flag in ("--require-hashes", "--no-deps", "--only-binary=:all:", "--no-build-isolation", "pip check"):
        assert flag in recipe, flag


def test_spark_image_runs_java_17_as_non_root() -> None:
    spark = _stages()["spark"]
    assert any("openjdk-17-jre-headless" in r.arguments for r in spark.all("RUN"))
    user = spark.last("USER")
    assert user is not None and int(user.arguments.split(":")[0]) >= 10000
    entrypoint = spark.last("ENTRYPOINT")
    assert entrypoint is not None and entrypoint.exec_form() == ["spark-entrypoint"]
    env = " ".join(i.arguments for i in spark.all("ENV"))
    assert "SPARK_HOME=/opt/venv/lib/python${PYTHON_MINOR}/site-packages/pyspark" in env
    assert "CDC_BRIDGE_IVY_DIR=/opt/ivy" in env


def test_spark_image_bakes_the_jobs_packages() -> None:
    """The job's own session start fills the Ivy cache at build time (the packages of
    `cdc-bridge spark packages`); the image carries that cache, writable by the job's user."""
    build = _stages()["spark-build"]
    assert any("CDC_BRIDGE_IVY_DIR=/opt/ivy" in i.arguments for i in build.all("ENV"))
    runs = " ".join(r.arguments for r in build.all("RUN"))
    assert "from bridge.spark.core.session import build_session; build_session().stop()" in runs
    assert "deploy/docker/spark-entrypoint /opt/venv/bin/spark-entrypoint" in runs
    copies = [c.arguments for c in _stages()["spark"].all("COPY")]
    assert "--from=spark-build --chown=10001:10001 /opt/ivy /opt/ivy" in copies
    session_source = (REPO / "bridge" / "spark" / "core" / "session.py").read_text()
    assert '"CDC_BRIDGE_IVY_DIR"' in session_source and '"spark.jars.ivy"' in session_source, \
        "the job must take its Ivy folder from CDC_BRIDGE_IVY_DIR"


def _fake_tools(tmp_path: Path) -> dict[str, str]:
    """SPARK_HOME/bin/spark-submit, JAVA_HOME/bin/java and cdc-bridge that print their arguments."""
    spark_home, java_home, bin_dir = tmp_path / "pyspark", tmp_path / "jdk", tmp_path / "bin"
    for path in (spark_home / "bin" / "spark-submit", java_home / "bin" / "java", bin_dir / "cdc-bridge"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/sh\necho {path.name}; for a in \"$@\"; do echo \"$a\"; done\n")
        path.chmod(0o755)
    return {"SPARK_HOME": str(spark_home), "JAVA_HOME": str(java_home), "PATH": f"{bin_dir}:/usr/bin:/bin"}


def _entrypoint(args: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    done = subprocess.run(["bash", str(LOCKS / "spark-entrypoint"), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_spark_entrypoint_starts_kubernetes_drivers_and_executors(tmp_path: Path) -> None:
    """What Spark on Kubernetes (the Spark operator) runs in the image: `driver ...` becomes a
    client-mode spark-submit bound to the pod address, `executor` the executor JVM with the
    variables Spark sets; anything else is a cdc-bridge command."""
    env = _fake_tools(tmp_path)
    driver = _entrypoint(["driver", "--properties-file", "/opt/spark/conf/spark.properties",
                          "local:///job.py", "mirror"], env | {"SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"}, tmp_path)
    assert driver == ["spark-submit", "--conf", "spark.driver.bindAddress=10.1.2.3",
                      "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3", "--deploy-mode", "client",
                      "--properties-file", "/opt/spark/conf/spark.properties", "local:///job.py", "mirror"]
    executor_env = env | {"SPARK_EXECUTOR_MEMORY": "2g", "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@d:7078",
                          "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "app-1",
                          "SPARK_EXECUTOR_POD_IP": "10.1.2.4", "SPARK_EXECUTOR_POD_NAME": "mirror-exec-3",
                          "SPARK_JAVA_OPT_1": "-Dspark.b=2", "SPARK_JAVA_OPT_0": "-Dspark.a=1",
                          "SPARK_JAVA_OPT_10": "-Dspark.k=11"}
    executor = _entrypoint(["executor"], executor_env, tmp_path)
    assert executor[:6] == ["java", "-Dspark.a=1", "-Dspark.b=2", "-Dspark.k=11", "-Xms2g", "-Xmx2g"]
    classpath = executor[executor.index("-cp") + 1]
    assert f"{env['SPARK_HOME']}/jars/*" in classpath.split(":")
    backend = executor.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert executor[backend + 1:] == ["--driver-url", "spark://CoarseGrainedScheduler@d:7078", "--executor-id", "3",
                                      "--cores", "1", "--app-id", "app-1", "--hostname", "10.1.2.4",
                                      "--resourceProfileId", "0", "--podName", "mirror-exec-3"]
    assert _entrypoint(["spark", "--help"], env, tmp_path) == ["cdc-bridge", "spark", "--help"]


def test_build_context_holds_what_the_dockerfile_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore and "*" in ignore, "the context starts empty (no .venv, .stack, tests)"
    for path in ("pyproject.toml", "README.md", "bridge/", "deploy/docker/"):
        assert f"!{path}" in ignore, path


@pytest.mark.slow
def test_install_recipe_builds_a_working_worker_venv(tmp_path: Path) -> None:
    """deploy/docker/install-venv, exactly as the build stage runs it, on this machine's Python
    (wheels from PyPI, pip's cache): the lock is complete (`pip check`) and cdc-bridge runs."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "bridge", source / "bridge", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(LOCKS, source / "deploy" / "docker")
    venv = tmp_path / "venv"
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    done = subprocess.run(
        [str(source / "deploy/docker/install-venv"), str(venv), str(source / "deploy/docker/requirements.lock"),
         str(source)],
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(base_python), "HOME": str(Path.home())},
        capture_output=True, text=True, timeout=540, check=False,
    )
    assert done.returncode == 0, f"install-venv failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "No broken requirements found" in done.stdout
    version = subprocess.run([str(venv / "bin" / "cdc-bridge"), "--version"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.returncode == 0 and version.stdout.startswith("cdc-bridge "), version.stderr
    assert "driver_row_parser: compiled (Cython)" in version.stdout, version.stdout  # the image pages at full speed
    assert not (venv / "bin" / "pyspark").exists()
    assert not list((venv / "lib").glob("python3*/site-packages/setuptools")), "the build tool stays behind"
