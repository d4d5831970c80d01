"""The Helm chart, with a real helm and no cluster: `helm lint --strict` and `helm template` with
the default values and every values file in helm/scylla-cdc-bridge/ci; every rendered manifest
valid against the Kubernetes API schemas (or its CRD); and the properties that matter: probes on
metrics.port, securityContext, instance ids, the worker's config file, secrets only in Secrets."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

from bridge.settings import BridgeConfig, load_config
from tests.ship.dockerfile import parse
from tests.ship.k8s import CHART, KUBERNETES_VERSIONS, Rendered, notes, run_helm, template, template_error, validate
from tests.ship.tools import REPO

CI = CHART / "ci"
SASL = CI / "sasl-ssl-values.yaml"
FULL = CI / "full-values.yaml"
DEPLOYMENT = CI / "deployment-values.yaml"
TLS_NETPOL = CI / "tls-network-policy-values.yaml"
VALUE_FILES = sorted(CI.glob("*.yaml"))


@pytest.fixture(scope="module")
def default() -> Rendered:
    return template()


@pytest.fixture(scope="module")
def sasl() -> Rendered:
    return template([SASL])


@pytest.fixture(scope="module")
def full() -> Rendered:
    return template([FULL])


def _container(rendered: Rendered) -> dict[str, Any]:
    workload = next(m for m in rendered.manifests if m["kind"] in ("StatefulSet", "Deployment"))
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["worker"]
    return dict(containers[0])


def _pod(rendered: Rendered) -> dict[str, Any]:
    workload = next(m for m in rendered.manifests if m["kind"] in ("StatefulSet", "Deployment"))
    return dict(workload["spec"]["template"]["spec"])


def _properties(rendered: Rendered) -> str:
    return str(rendered.one("ConfigMap")["data"]["worker.properties"])


def _materialize(rendered: Rendered, root: Path, secret_text: str = "s3cret") -> tuple[Path, dict[str, str]]:
    """The pod's files under `root`: the ConfigMap's properties with /etc/cdc-bridge moved to
    root, and every Secret volume's items as files (content `secret_text`); returns the
    properties file and the pod's environment (the pod name for fieldRef metadata.name)."""
    pod, container = _pod(rendered), _container(rendered)
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            continue
        for item in secret["items"]:
            target = root / Path(mount["mountPath"]).relative_to("/etc/cdc-bridge") / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"{secret_text}\n")
    config_mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert config_mount["mountPath"] == container["args"][container["args"].index("--config") + 1]
    properties = root / "worker.properties"
    properties.write_text(_properties(rendered).replace("/etc/cdc-bridge", str(root)))
    env: dict[str, str] = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[item["name"]] = "cdc-scylla-cdc-bridge-2"
    return properties, env


# ------------------------------------------------------------------ lint, render, validate


@pytest.mark.parametrize("values", [None, *VALUE_FILES], ids=lambda v: v.name if v else "default")
def test_helm_lint_strict(values: Path | None) -> None:
    done = run_helm("lint", "--strict", *(["--values", str(values)] if values else []))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", [None, *VALUE_FILES], ids=lambda v: v.name if v else "default")
@pytest.mark.parametrize("kubernetes_version", KUBERNETES_VERSIONS)
def test_every_rendered_manifest_passes_schema_validation(values: Path | None, kubernetes_version: str) -> None:
    rendered = template([values] if values else [])
    assert rendered.manifests
    for manifest in rendered.manifests:
        validate(manifest, kubernetes_version)


def test_validation_catches_a_wrong_manifest(default: Rendered) -> None:
    """The validators are not blind: an unknown field and a wrong type fail, CRDs included."""
    statefulset = default.one("StatefulSet")
    broken = {**statefulset, "spec": {**statefulset["spec"], "replica": 3}}
    with pytest.raises(AssertionError, match="replica"):
        validate(broken, KUBERNETES_VERSIONS[-1])
    monitor = template(sets=["metrics.serviceMonitor.enabled=true"]).one("ServiceMonitor")
    monitor["spec"]["endpoints"][0]["interval"] = 30
    with pytest.raises(AssertionError, match="interval"):
        validate(monitor, KUBERNETES_VERSIONS[-1])


def test_default_and_full_values_render_the_expected_objects(default: Rendered, full: Rendered) -> None:
    assert default.kinds == ["ConfigMap", "PodDisruptionBudget", "Service", "ServiceAccount", "StatefulSet"]
    assert full.kinds == ["ConfigMap", "PodDisruptionBudget", "PodMonitor", "Role", "RoleBinding", "Secret", "Secret",
                          "Service", "ServiceAccount", "ServiceAccount", "ServiceMonitor", "SparkApplication",
                          "StatefulSet"]
    assert template([DEPLOYMENT]).kinds == ["ConfigMap", "Deployment", "Service", "ServiceAccount"]


# ------------------------------------------------------------------ the worker's pod


@pytest.mark.parametrize("fixture", ["default", "full"])
def test_probes_and_metrics_port(fixture: str, request: pytest.FixtureRequest) -> None:
    rendered: Rendered = request.getfixturevalue(fixture)
    container = _container(rendered)
    port = int(re.search(r"^metrics\.port=(\d+)$", _properties(rendered), re.M)[1])  # type: ignore[index]
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    service = rendered.one("Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"}]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert {"name": "CDC_BRIDGE_METRICS_PORT", "value": str(port)} in container["env"]
    assert port == (9404 if fixture == "default" else 9500)


def test_default_port_is_the_settings_default(default: Rendered) -> None:
    assert _container(default)["ports"][0]["containerPort"] == BridgeConfig.model_fields["metrics_port"].default


@pytest.mark.parametrize("fixture", ["default", "full"])
def test_security_context_non_root_read_only(fixture: str, request: pytest.FixtureRequest) -> None:
    rendered: Rendered = request.getfixturevalue(fixture)
    pod, container = _pod(rendered), _container(rendered)
    _, stages = parse(REPO / "Dockerfile")
    image_uid = int(stages[-1].last("USER").arguments.split(":")[0])  # type: ignore[union-attr]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == image_uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]], "a writable /tmp under a read-only root"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_statefulset_pod_names_become_instance_ids(sasl: Rendered, tmp_path: Path) -> None:
    statefulset = sasl.one("StatefulSet")
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["serviceName"] == sasl.one("Service")["metadata"]["name"]
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    env = {e["name"]: e for e in _container(sasl)["env"]}
    assert env["CDC_BRIDGE_WORKER_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    properties, environ = _materialize(sasl, tmp_path)
    assert load_config(properties, environ=environ).worker_instance_id == "cdc-scylla-cdc-bridge-2"
    assert "worker.instance.id" not in _properties(sasl), "one id per pod: not in the shared ConfigMap"


def test_deployment_uses_dynamic_membership() -> None:
    rendered = template([DEPLOYMENT])
    names = [e["name"] for e in _container(rendered)["env"]]
    assert "CDC_BRIDGE_WORKER_INSTANCE_ID" not in names, "Deployment pod names change on every restart"
    strategy = rendered.one("Deployment")["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0


def test_grace_period_outlasts_the_worker_shutdown(default: Rendered, full: Rendered) -> None:
    assert _pod(default)["terminationGracePeriodSeconds"] == 30 + 15
    assert _pod(full)["terminationGracePeriodSeconds"] == 60 + 15  # shutdown.timeout.ms: 60000
    assert _pod(template(sets=["terminationGracePeriodSeconds=120"]))["terminationGracePeriodSeconds"] == 120


def test_config_change_rolls_the_pods(default: Rendered) -> None:
    changed = template(sets=["config.slots\\.count=32"])
    key = "checksum/config"
    before = default.one("StatefulSet")["spec"]["template"]["metadata"]["annotations"][key]
    assert changed.one("StatefulSet")["spec"]["template"]["metadata"]["annotations"][key] != before


# ------------------------------------------------------------------ config and secrets


def test_sasl_ssl_settings_reach_the_worker_config(sasl: Rendered, tmp_path: Path) -> None:
    """Acceptance: three replicas with SASL_SSL render a worker.properties the real settings loader
    accepts, every setting carried through, passwords read from the Secret files the pod mounts."""
    properties, environ = _materialize(sasl, tmp_path)
    config = load_config(properties, environ=environ)
    assert config.name == "orders-cdc" and config.topic_prefix == "shop"
    assert config.tables() == [("shop", "orders"), ("shop", "customers")]
    assert config.scylla_contact_points() == [("scylla-client.scylla.svc", 9042)]
    assert config.local_dc == "dc1" and config.slots_count == 128 and config.tombstones_on_delete is False
    assert config.initial_lookback_ms == 86_400_000
    assert config.scylla_user == "cdc_reader" and config.scylla_password_value() == "s3cret"
    kafka = config.kafka_client_config()
    assert kafka["bootstrap.servers"] == "prod-kafka-bootstrap.kafka.svc:9093"
    assert kafka["security.protocol"] == "SASL_SSL" and kafka["sasl.mechanism"] == "SCRAM-SHA-512"
    assert kafka["sasl.username"] == "cdc-bridge" and kafka["sasl.password"] == "s3cret"
    assert Path(kafka["ssl.ca.location"]).read_text() == "s3cret\n", "the CA file is where the config says"
    assert kafka["compression.type"] == "zstd"


def test_sasl_ssl_secrets_come_from_existing_secrets(sasl: Rendered) -> None:
    assert sasl.of_kind("Secret") == [], "existing Secrets are referenced, never copied"
    volumes = {v["name"]: v.get("secret") for v in _pod(sasl)["volumes"]}
    assert volumes["scylla-password"] == {"secretName": "scylla-cdc-reader", "defaultMode": 0o440,
                                          "items": [{"key": "password", "path": "password"}]}
    assert volumes["kafka-password"]["secretName"] == "cdc-bridge"  # type: ignore[index]
    assert volumes["kafka-ca"]["secretName"] == "prod-cluster-ca-cert"  # type: ignore[index]
    assert all(m["readOnly"] for m in _container(sasl)["volumeMounts"] if m["name"] != "tmp")


def test_passwords_given_as_values_stay_in_secrets(full: Rendered, tmp_path: Path) -> None:
    passwords = ("cql-Passw0rd-in-values", "kafka-Passw0rd-in-values")
    secrets = {s["metadata"]["name"]: s for s in full.of_kind("Secret")}
    assert set(secrets) == {"cdc-scylla-cdc-bridge-scylla", "cdc-scylla-cdc-bridge-kafka"}
    stored = {base64.b64decode(s["data"]["password"]).decode() for s in secrets.values()}
    assert stored == set(passwords)
    for manifest in full.manifests:
        if manifest["kind"] == "Secret":
            continue
        text = str(manifest)
        for password in passwords:
            assert password not in text and base64.b64encode(password.encode()).decode() not in text, \
                f"{manifest['kind']} carries a password"
    properties, environ = _materialize(full, tmp_path, secret_text="from-the-secret")
    kafka = load_config(properties, environ=environ).kafka_client_config()
    assert kafka["sasl.password"] == "from-the-secret"
    assert Path(kafka["ssl.certificate.location"]).is_file() and Path(kafka["ssl.key.location"]).is_file()


@pytest.mark.parametrize(("sets", "message"), [
    (["config.nope=1"], "additional properties 'nope' not allowed"),
    (["config.scylla\\.password=plain"], "/config/scylla.password"),
    (["config.kafka\\.sasl\\.password=plain"], "/config/kafka.sasl.password"),
    (["config.worker\\.instance\\.id=w1"], "/config/worker.instance.id"),
    (["config.slots\\.count=0"], "/config/slots.count"),
    (["config.scylla\\.consistency\\.level=MOST"], "/config/scylla.consistency.level"),
    (["config.topic\\.prefix="], "/config/topic.prefix"),
    (["metrics.port=0"], "/metrics/port"),
    (["workload=DaemonSet"], "/workload"),
    (["kafka.securityProtocol=SASL_SSL"], "/kafka/sasl/username"),
    (["kafka.securityProtocol=SASL_SSL", "kafka.sasl.username=u"], "/kafka/sasl"),
    (["scylla.auth.username=u"], "/scylla/auth"),
    (["replicaCount=-1"], "/replicaCount"),
    (["spark.enabled=true"], "/spark/checkpoint"),
    (["spark.enabled=true", "spark.checkpoint=/c"], "/spark/delta"),
    (["spark.enabled=true", "spark.checkpoint=/c", "spark.job=compact"], "/spark/job"),
    (["extraVolumeMounts[0].name=x"], "/extraVolumeMounts/0"),
    (["networkPolicy.enabled=true", "networkPolicy.egress.kafka.ports[0]=0"], "/networkPolicy/egress/kafka/ports/0"),
    (["networkPolicy.ingress.namespaces=monitoring"], "/networkPolicy/ingress"),
])
def test_bad_values_fail_at_install_time(sets: list[str], message: str) -> None:
    assert message in template_error(sets=sets)


# ------------------------------------------------------------------ monitoring, PDB, Spark


def test_monitors_scrape_the_metrics_port(full: Rendered) -> None:
    service, pod_labels = full.one("Service"), full.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    monitor = full.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["data"]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["path"] == "/metrics"
    pod_monitor = full.one("PodMonitor")
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == _container(full)["ports"][0]["name"]
    annotations = full.one("StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9500" and annotations["prometheus.io/scrape"] == "true"


def test_pdb_covers_the_workers(sasl: Rendered) -> None:
    pdb = sasl.one("PodDisruptionBudget")
    labels = sasl.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_spark_application_runs_the_spark_job_with_the_workers_config(full: Rendered) -> None:
    from bridge.cli import build_parser
    from bridge.spark.core.session import packages

    app = full.one("SparkApplication")["spec"]
    assert app["image"] == "registry.example.com/scylla-cdc-bridge-spark:0.1.0"
    assert app["type"] == "Python" and app["mode"] == "cluster"
    assert app["mainApplicationFile"].endswith("/site-packages/bridge/spark/__main__.py")
    args = build_parser().parse_args(["spark", *app["arguments"]])  # what python -m bridge.spark parses
    assert (args.spark_command, args.checkpoint, args.delta) == ("mirror", "s3a://bucket/checkpoints/orders",
                                                                 "s3a://bucket/delta")
    assert app["deps"]["packages"] == packages(), "the packages the job asks for (and the image's Ivy cache holds)"
    assert app["sparkConf"] == {"spark.jars.ivy": "/opt/ivy", "spark.sql.shuffle.partitions": "8"}
    config_map = full.one("ConfigMap")["metadata"]["name"]
    for role in ("driver", "executor"):
        assert app[role]["configMaps"] == [{"name": config_map, "path": str(Path(str(args.config)).parent)}]
        assert {s["name"] for s in app[role]["secrets"]} == {"cdc-scylla-cdc-bridge-kafka", "kafka-ca"}
        assert app[role]["securityContext"]["runAsNonRoot"] is True
        assert app[role]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    account = app["driver"]["serviceAccount"]
    binding = full.one("RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "data"}]
    assert "pods" in full.one("Role")["rules"][0]["resources"]
    assert full.one("SparkApplication")["metadata"]["labels"]["app.kubernetes.io/component"] == "spark"


def test_notes_tell_how_to_reach_the_workers(tmp_path: Path) -> None:
    text = notes(values=[SASL], workdir=tmp_path)
    assert "3 scylla-cdc-bridge worker(s) as a StatefulSet" in text
    assert "static membership" in text and "cdc-bridge status" in text and "SASL_SSL" in text


# ------------------------------------------------------------------ CQL TLS files, NetworkPolicy


def test_cql_tls_files_come_from_extra_volumes(tmp_path: Path) -> None:
    """The CQL truststore and client certificate: a Secret mounted through extraVolumes where the
    scylla.ssl.* settings point, read-only, next to the chart's own mounts."""
    rendered = template([TLS_NETPOL])
    container, pod = _container(rendered), _pod(rendered)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "scylla-tls")
    assert mount == {"name": "scylla-tls", "mountPath": "/etc/cdc-bridge/tls/scylla", "readOnly": True}
    assert {"config", "tmp"} <= {m["name"] for m in container["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v["name"] == "scylla-tls")
    assert volume["secret"]["secretName"] == "scylla-client-tls" and volume["secret"]["defaultMode"] == 0o440
    properties, environ = _materialize(rendered, tmp_path, secret_text="pem")
    config = load_config(properties, environ=environ)
    assert config.ssl_enabled is True
    for path in (config.ssl_truststore_path, config.ssl_cert_chain, config.ssl_private_key):
        assert path is not None and Path(path).read_text() == "pem\n", path


def test_network_policy_admits_only_the_metrics_port_and_the_clusters(default: Rendered) -> None:
    assert default.of_kind("NetworkPolicy") == [], "off by default"
    rendered = template([TLS_NETPOL])
    policy = rendered.one("NetworkPolicy")["spec"]
    labels = rendered.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = policy["ingress"]
    assert ingress["ports"] == [{"port": 9404, "protocol": "TCP"}]
    assert ingress["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    dns, kafka, scylla, registry = policy["egress"]
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    assert kafka["ports"] == [{"port": 9093, "protocol": "TCP"}]
    assert kafka["to"][0]["podSelector"]["matchLabels"] == {"strimzi.io/cluster": "my-cluster"}
    assert scylla["ports"] == [{"port": 9142, "protocol": "TCP"}, {"port": 19142, "protocol": "TCP"}]
    assert registry["ports"] == [{"port": 8080, "protocol": "TCP"}]


def test_network_policy_defaults_follow_the_metrics_port_and_open_no_other_port() -> None:
    policy = template(sets=["networkPolicy.enabled=true", "metrics.port=9500"]).one("NetworkPolicy")["spec"]
    [ingress] = policy["ingress"]
    assert ingress == {"ports": [{"port": 9500, "protocol": "TCP"}]}, "any peer, but only the metrics port"
    ports = [p["port"] for rule in policy["egress"] for p in rule["ports"]]
    assert ports == [53, 53, 9092, 9093, 9042, 9142, 19042, 19142]
    assert all("to" not in rule for rule in policy["egress"][1:]), "no peers given: any address on those ports"


def test_rest_api_port_auth_and_tls_reach_the_worker(tmp_path: Path) -> None:
    """rest.enabled: the REST port on the container, the Service and the NetworkPolicy (from
    rest.ingressFrom only), probes unchanged; the auth and TLS Secrets mounted where the rendered
    settings point, which the real settings loader accepts. Off by default: no port, no listener."""
    rendered = template([CI / "rest-values.yaml"])
    container = _container(rendered)
    assert {"name": "rest", "containerPort": 8443, "protocol": "TCP"} in container["ports"]
    assert container["livenessProbe"]["httpGet"]["port"] == "metrics"
    assert {"name": "rest", "port": 8443, "targetPort": "rest", "protocol": "TCP"} in \
        rendered.one("Service")["spec"]["ports"]
    rest_rule = rendered.one("NetworkPolicy")["spec"]["ingress"][1]
    assert rest_rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert rest_rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "kafka-ui"}
    properties, environ = _materialize(rendered, tmp_path)
    config = load_config(properties, environ=environ)
    assert config.listeners == "https://0.0.0.0:8443" and config.rest_client_auth == "requested"
    for path in (config.rest_credentials_file, config.rest_keystore, config.rest_key, config.rest_truststore):
        assert path is not None and path.read_text() == "s3cret\n"
    default = template()
    assert "listeners=" not in _properties(default) and len(_container(default)["ports"]) == 1
