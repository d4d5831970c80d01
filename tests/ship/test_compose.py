"""docker-compose.yml without a Docker engine: valid against the Compose Specification's own JSON
schema (from the compose-go module), every image pinned through .env, the services wired as the
product needs them, and the bridge's settings in it accepted by `cdc-bridge config check`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bridge.settings import BridgeConfig, load_config
from tests.ship.tools import COMPOSE_GO, REPO, go_module

COMPOSE = REPO / "docker-compose.yml"
SPARK_JOBS = {"spark-flatten": "flatten", "spark-mirror": "mirror"}
CORE = {"scylla", "scylla-init", "kafka", "bridge", *SPARK_JOBS}  # `docker compose up`: the whole pipeline
OPTIONAL = {"registry": "registry", "prometheus": "monitoring"}


def _dotenv() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (REPO / ".env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, equals, value = line.partition("=")
            assert equals, f".env: {line!r} is not KEY=VALUE"
            found[key.strip()] = value.strip()
    return found


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `$$`; an unset variable without
    a default fails (compose would substitute an empty string with a warning)."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        name, operator, default = match["name"], match["op"], match["default"]
        if name in env and (env[name] != "" or operator != ":-"):
            return env[name]
        assert operator is not None, f"${{{name}}} is not set in .env and has no default"
        return default or ""

    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}", substitute, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(raw: dict[str, Any]) -> dict[str, Any]:
    resolved = interpolate(raw["services"], _dotenv())
    assert isinstance(resolved, dict)
    return resolved


def test_compose_file_follows_the_compose_specification(raw: dict[str, Any]) -> None:
    """The schema `docker compose` itself validates with (compose-go); a typo'd key fails."""
    schema_path = go_module(COMPOSE_GO) / "schema" / "compose-spec.json"
    schema = json.loads(schema_path.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(raw))
    assert errors == []
    broken = json.loads(json.dumps(raw))
    broken["services"]["bridge"]["restart_policy"] = "always"
    assert list(validator.iter_errors(broken)), "the schema must reject an unknown service key"


def test_every_image_is_pinned_in_dotenv(raw: dict[str, Any], services: dict[str, Any]) -> None:
    assert set(services) == CORE | set(OPTIONAL)
    for name, service in raw["services"].items():
        image = service["image"]
        assert re.fullmatch(r"[\w./-]+:\$\{\w+\}", image), f"{name}: the tag of {image!r} must come from .env"
        tag = services[name]["image"].rpartition(":")[2]
        assert tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag), f"{name}: {tag!r} is not a full version"
    project = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert project is not None and _dotenv()["BRIDGE_VERSION"] == project[1], "BRIDGE_VERSION is the project's"


def test_kafka_is_the_version_the_tests_run_and_runs_kraft(services: dict[str, Any]) -> None:
    pom = (REPO / "deploy" / "local" / "kafka" / "pom.xml").read_text()
    tested = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    assert tested is not None
    kafka = services["kafka"]
    assert kafka["image"] == f"apache/kafka:{tested[1]}", "docker compose must run the Kafka the tests run"
    env = {key: str(value) for key, value in kafka["environment"].items()}
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in key for key in env)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env["CLUSTER_ID"]), "KRaft needs a base64 UUID cluster id"
    listeners = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert listeners["INTERNAL"] == "kafka:19092" and listeners["EXTERNAL"] == "localhost:9092"
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(protocols) == {"INTERNAL", "EXTERNAL", env["KAFKA_CONTROLLER_LISTENER_NAMES"]}
    # transactions on a one-broker cluster: the transaction log must fit on one replica
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    assert "9092:9092" in kafka["ports"]


def test_scylla_is_a_developer_node_and_init_creates_the_cdc_tables(services: dict[str, Any]) -> None:
    scylla = services["scylla"]
    assert scylla["image"].startswith("scylladb/scylla:")
    command = scylla["command"]
    assert command[command.index("--smp") + 1] == "1"
    assert command[command.index("--developer-mode") + 1] == "1"
    assert "healthcheck" in scylla
    init = services["scylla-init"]
    assert init["depends_on"]["scylla"]["condition"] == "service_healthy"
    mounted = {v.split(":")[1]: REPO / v.split(":")[0] for v in init["volumes"]}
    script = mounted[init["entrypoint"][-1]]
    cql = re.sub(r"--[^\n]*", "", script.read_text())
    for keyspace, table in _bridge_config(services).tables():
        created = re.search(rf"CREATE TABLE IF NOT EXISTS {keyspace}\.{table} \((.*?)\)\s*WITH([^;]*);", cql, re.S)
        assert created is not None, f"init.cql does not create {keyspace}.{table}, which the bridge reads"
        assert re.search(r"cdc\s*=\s*\{[^}]*'enabled'\s*:\s*true", created[2]), f"{keyspace}.{table} without CDC"
        assert re.search(rf"CREATE KEYSPACE IF NOT EXISTS {keyspace}\b", cql)


def _bridge_files(services: dict[str, Any]) -> dict[str, Path]:
    return {v.split(":")[1]: REPO / v.split(":")[0] for v in services["bridge"]["volumes"]}


def _bridge_environment(services: dict[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in services["bridge"]["environment"].items()}


def _bridge_config(services: dict[str, Any]) -> BridgeConfig:
    bridge = services["bridge"]
    config_path = bridge["command"][bridge["command"].index("--config") + 1]
    return load_config(_bridge_files(services)[config_path], environ=_bridge_environment(services))


def test_bridge_settings_pass_config_check(services: dict[str, Any]) -> None:
    """The real `cdc-bridge config check`, on the mounted file with the service's environment."""
    bridge = services["bridge"]
    assert bridge["command"][:2] == ["run", "--config"]
    config_file = _bridge_files(services)[bridge["command"][2]]
    env = {"PATH": "/usr/bin:/bin"} | _bridge_environment(services)
    done = subprocess.run([sys.executable, "-m", "bridge.cli", "config", "check", "--config", str(config_file)],
                          env=env, capture_output=True, text=True, timeout=60, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "bridge.cli", "config", "check", "--config", str(config_file)],
                         env=env | {"CDC_BRIDGE_SLOTS_COUNT": "many"}, capture_output=True, text=True, timeout=60,
                         check=False, cwd=REPO)
    assert bad.returncode == 2 and "slots.count" in bad.stderr


def test_bridge_reaches_the_compose_services_and_scylla_metadata(services: dict[str, Any]) -> None:
    config = _bridge_config(services)
    assert config.scylla_contact_points() == [("scylla", 9042)]
    assert config.kafka_client_config()["bootstrap.servers"] == "kafka:19092"
    # ScyllaDB's real CDC metadata tables, not the emulator's keyspaces
    assert config.vnodes_metadata_keyspace == "system_distributed"
    assert config.tablets_metadata_keyspace == "system"
    assert config.metrics_port == 9404 and _bridge_environment(services)["CDC_BRIDGE_METRICS_PORT"] == "9404"
    assert config.value_converter == "json"
    registry = services["registry"]
    url = config.value_registry_url or ""
    assert url.startswith("http://registry:") and registry["ports"][0].split(":")[1] in url


def test_bridge_scales_and_stops_gracefully(services: dict[str, Any]) -> None:
    bridge = services["bridge"]
    assert "container_name" not in bridge, "--scale bridge=3 needs generated container names"
    assert all(":" not in str(port) for port in bridge["ports"]), "fixed host ports collide when scaled"
    assert bridge["depends_on"]["scylla-init"]["condition"] == "service_completed_successfully"
    assert bridge["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert bridge["build"]["target"] == "worker" and bridge["read_only"] is True
    grace = int(bridge["stop_grace_period"].removesuffix("s"))
    assert grace * 1000 > _bridge_config(services).shutdown_timeout_ms, "the stop must outlast shutdown.timeout.ms"


def test_optional_services_sit_behind_profiles(services: dict[str, Any]) -> None:
    for name in CORE:
        assert "profiles" not in services[name], f"{name} must start with a plain `docker compose up`"
    for name, profile in OPTIONAL.items():
        assert services[name]["profiles"] == [profile]


@pytest.mark.parametrize(("service", "job"), SPARK_JOBS.items())
def test_spark_jobs_run_real_cdc_bridge_spark_commands(services: dict[str, Any], service: str, job: str) -> None:
    """Each job's command parses with the real CLI (docs/spark.md's command); its files are where
    the command says, in the spark image, with the bridge's own settings and converter."""
    from bridge.cli import build_parser

    spark = services[service]
    assert spark["build"]["target"] == "spark" and spark["image"].startswith("scylla-cdc-bridge-spark:")
    args = build_parser().parse_args(spark["command"])
    assert (args.command, args.spark_command) == ("spark", job)
    assert args.master == "local[2]", "compose runs each job in local mode in its container"
    mounts = {v.split(":")[1]: v.split(":")[0] for v in spark["volumes"]}
    assert mounts[str(args.config)] == "./deploy/compose/bridge.properties"
    assert args.checkpoint == f"/data/checkpoints/{job}" and mounts["/data"] == "spark-data"
    for converter in ("CDC_BRIDGE_VALUE_CONVERTER", "CDC_BRIDGE_KEY_CONVERTER"):
        assert spark["environment"][converter] == services["bridge"]["environment"][converter]
    assert spark["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert spark["restart"] == "unless-stopped"
    if job == "mirror":
        assert args.delta.startswith("/data/")
    else:
        assert args.output_topic == "{topic}.flat"
        assert "delete.tombstone.handling.mode=rewrite" in args.option


def test_spark_jobs_keep_apart_and_read_the_bridges_topics(services: dict[str, Any]) -> None:
    """Their own checkpoints (one checkpoint belongs to one job), and the topics the worker writes."""
    from bridge.cli import build_parser
    from bridge.spark.runner import JobRequest, source_options

    parsed = [build_parser().parse_args(services[name]["command"]) for name in SPARK_JOBS]
    assert len({args.checkpoint for args in parsed}) == len(parsed)
    config = _bridge_config(services)
    files = {v.split(":")[1]: REPO / v.split(":")[0] for v in services["spark-mirror"]["volumes"] if ":" in v}
    source = source_options(JobRequest(checkpoint="/c", config=files["/etc/cdc-bridge/worker.properties"]))
    assert set(source.topics) == {f"{config.topic_prefix}.{ks}.{table}" for ks, table in config.tables()}
    assert source.bootstrap_servers == "kafka:19092"


def test_prometheus_scrapes_every_bridge_replica(services: dict[str, Any]) -> None:
    prometheus = services["prometheus"]
    mounted = {v.split(":")[1]: REPO / v.split(":")[0] for v in prometheus["volumes"]}
    config = yaml.safe_load(mounted["/etc/prometheus/prometheus.yml"].read_text())
    job = config["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["dns_sd_configs"] == [{"names": ["bridge"], "type": "A", "port": _bridge_config(services).metrics_port}]


def test_interpolation_fails_on_unset_variables() -> None:
    assert interpolate("a:${X}", {"X": "1"}) == "a:1"
    assert interpolate("${Y:-json}", {}) == "json"
    assert interpolate("$${Z}", {}) == "${Z}"
    with pytest.raises(AssertionError, match="not set"):
        interpolate("${MISSING}", {})
