"""Starting and stopping one worker process: connect to the cluster, check Kafka access, make
sure the topics exist, start the `Worker`, run it until SIGTERM/SIGINT.

Every failure to start raises `StartupError(key, reason)`, naming the setting that helps; the
command line (`bridge/cli/run.py`) prints it as one line. Secrets are registered for masking
before any client could echo them in a log line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka.admin import AdminClient

from bridge.build_info import hot_path
from bridge.control.rest.server import serve_rest
from bridge.envelope.errors import PlanError, SerializationError
from bridge.kafka.access import check_access
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError
from bridge.kafka.topics import (
    TOPICS_READY_BOUND_S,
    await_topics,
    check_worker_topics,
    control_topic,
    data_topic,
    ensure_topics,
    offsets_topic,
    signals_topic,
    slots_topic,
    status_topic,
)
from bridge.observability import register_secret
from bridge.observability.logs import is_secret_key
from bridge.observability.progress import ProgressLine
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.cluster_clock import ClusterClock
from bridge.scylla.errors import ErrorKind, SchemaError, classify
from bridge.scylla.session import ClusterUnavailableError, CqlAccessError, connect
from bridge.settings import BridgeConfig, ConfigError
from bridge.settings.checks import check_tables_as_run_would
from bridge.settings.masking import url_password
from bridge.worker.loop import Worker
from bridge.worker.startup_wait import wait_out
from bridge.worker.tuning import tune_for_streaming

log = structlog.get_logger(__name__)
KAFKA_TIMEOUT_S = 15.0


class StartupError(Exception):
    """The worker cannot start: `key` is the setting that helps, `reason` says why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


def run_worker(config: BridgeConfig, progress: ProgressLine,
               on_serving: Callable[[int | None], object] | None = None) -> int:
    """Run one worker until a signal or a fatal error; returns the exit code. Raises `StartupError`.
    `on_serving` is told the metrics port once it is bound (a supervisor's child: with
    `metrics.port` 0 it serves on any free port, which the supervisor learns this way)."""
    started = time.monotonic()

    def remaining_s() -> float:
        """One start-up bound for every wait of this start (Scylla, then Kafka), not one each."""
        return config.startup_timeout_ms / 1000 - (time.monotonic() - started)

    try:
        kafka = config.kafka_client_config()
        _register_secrets(config, kafka)
        tls = config.scylla_ssl_context()
    except ConfigError as error:
        raise StartupError(error.key, error.reason) from None
    # The probes answer before Scylla is connected: a kubelet asking /healthz while start-up
    # waits for Scylla must get 200, not a refused connection (it would restart the pod); lags
    # use the cluster's clock once it is connected.
    cluster_clock: list[ClusterClock] = []
    try:
        telemetry = WorkerTelemetry(config.tables(), config.confidence_window_size, config.metrics_port, progress,
                                    clock=lambda: cluster_clock[0]() if cluster_clock else time.time(),
                                    metrics_host=config.metrics_bind_address, any_free_port=on_serving is not None)
    except OSError as error:
        raise StartupError("metrics.port", f"{config.metrics_bind_address}:{config.metrics_port}: "
                                           f"{error.strerror or error}") from None
    if on_serving is not None:
        on_serving(telemetry.metrics_port)
    try:
        cluster, session = _connect(config, tls, remaining_s(), telemetry)
        try:
            clock = ClusterClock(session)
            clock.start()
            cluster_clock.append(clock)
            try:
                return _serve(config, session, kafka, telemetry, clock, remaining_s)
            finally:
                clock.close()
        finally:
            cluster.shutdown()
    finally:
        telemetry.close()


def _connect(config: BridgeConfig, tls: Any, bound_s: float, telemetry: WorkerTelemetry) -> tuple[Any, Any]:
    """(cluster, session) once Scylla answers and the tables' image options pass (`config check`
    checks the same). A Scylla that does not answer, or times out reading the tables' options,
    is waited for; refused credentials, bad image options and the like end start-up at once."""
    def attempt(_remaining_s: float) -> tuple[Any, Any]:
        cluster, session = connect(config.scylla_contact_points(), user=config.scylla_user,
                                   password=config.scylla_password_value(), local_dc=config.local_dc,
                                   ssl_context=tls)
        try:
            check_tables_as_run_would(config, session)
        except BaseException:
            cluster.shutdown()
            raise
        return cluster, session

    try:
        return wait_out("Scylla", attempt, bound_s, unavailable=_scylla_away, health=telemetry.health)
    except (ConfigError, CqlAccessError) as error:
        raise StartupError(error.key, error.reason) from None
    except ClusterUnavailableError as error:
        raise StartupError("scylla.cluster.ip.addresses", str(error)) from None
    except Exception as error:
        raise StartupError("scylla.cluster.ip.addresses",
                           f"connecting, or reading the tables' CDC options: {error}") from None


def _scylla_away(error: BaseException) -> bool:
    """No contact point answered, or a query timed out: waited for. Refused credentials or
    certificates, and the tables' own problems (ConfigError), are not."""
    if isinstance(error, CqlAccessError | ConfigError):
        return False
    return isinstance(error, ClusterUnavailableError) or classify(error) is ErrorKind.TRANSIENT


def _register_secrets(config: BridgeConfig, kafka: dict[str, str]) -> None:
    """Masked wherever they would appear in a log line (a driver error echoing a password)."""
    register_secret(config.scylla_password_value())
    for secret in (config.ssl_truststore_password, config.ssl_keystore_password):
        register_secret(secret.get_secret_value() if secret is not None else None)
    for url in (config.key_registry_url, config.value_registry_url):
        register_secret(url_password(url) if url else None)
    for user_info in (config.key_registry_user_info, config.value_registry_user_info):
        register_secret(user_info.get_secret_value().split(":", 1)[1] if user_info is not None else None)
    for key, value in kafka.items():
        if is_secret_key(key):
            register_secret(value)


def _serve(config: BridgeConfig, session: Any, kafka: dict[str, str], telemetry: WorkerTelemetry,
           clock: ClusterClock, remaining_s: Callable[[], float]) -> int:
    topics = [offsets_topic(config.offsets_topic, config.offset_storage_partitions,
                            config.offset_storage_replication_factor),
              slots_topic(config.slots_topic_name, config.slots_count), status_topic(config.status_topic),
              control_topic(config.config_topic)]
    topics += [data_topic(f"{config.topic_prefix}.{ks}.{table}") for ks, table in config.tables()]
    if config.dead_letter_topic:
        topics.append(data_topic(config.dead_letter_topic))
    if config.signals_topic:
        topics.append(signals_topic(config.signals_topic))
    if config.notifications_topic:
        topics.append(data_topic(config.notifications_topic))

    def prepare_kafka(remaining_s: float) -> None:
        # Before any other client: a refused password or certificate ends start-up in one line.
        check_access(kafka, min(KAFKA_TIMEOUT_S, remaining_s))
        admin = AdminClient({**with_logger(kafka), "socket.timeout.ms": int(KAFKA_TIMEOUT_S * 1000)})
        ensure_topics(admin, topics, KAFKA_TIMEOUT_S)
        # just created, by us or another worker (the control and status topics among them)
        await_topics(admin, [topic.topic for topic in topics], min(TOPICS_READY_BOUND_S, remaining_s))
        check_worker_topics(admin, offsets=config.offsets_topic, slots=config.slots_topic_name,
                            slots_count=config.slots_count, name=config.name,
                            bootstrap=kafka.get("bootstrap.servers", "?"), timeout_s=KAFKA_TIMEOUT_S)

    made: list[Worker] = []

    def start_worker(_remaining_s: float) -> Worker:
        """The worker's own start reads the offsets, control and signals topics to their end and
        begins transactions: a Kafka that does not answer there is waited for too (issue 42: 'the
        same for the control and status topics'); a half-made worker's clients go first."""
        if made:
            with contextlib.suppress(Exception):
                made.pop().shutdown()
        made.append(Worker(config, session, kafka, telemetry, clock))
        made[-1].start()
        return made[-1]

    def kafka_away(error: BaseException) -> bool:
        return isinstance(error, KafkaUnavailableError)  # refusals are KafkaSettingError: not waited for

    try:
        wait_out("Kafka", prepare_kafka, remaining_s(), unavailable=kafka_away, health=telemetry.health)
        # The REST API answers from here on (daemon threads: a start that fails below ends the process).
        rest = serve_rest(config, kafka)
        worker = wait_out("Kafka", start_worker, remaining_s(), unavailable=kafka_away, health=telemetry.health)
    except ConfigError as error:  # a REST listener that cannot be served, or its credentials file
        raise StartupError(error.key, error.reason) from None
    except KafkaSettingError as error:  # refused access, a topic that would lose or repeat data, corrupt offsets
        raise StartupError(error.key, error.reason) from None
    except KafkaUnavailableError as error:
        raise StartupError("kafka.bootstrap.servers", f"{kafka.get('bootstrap.servers')}: {error}") from None
    except (SchemaError, PlanError) as error:  # a missing table or one whose types cannot be read; a name clash
        raise StartupError("scylla.table.names", str(error)) from None
    except SerializationError as error:  # the registry refused or could not take a table's schemas
        side = "key" if "-key:" in str(error) else "value"
        raise StartupError(f"{side}.converter.schema.registry.url", str(error)) from None
    tune_for_streaming()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    _exit_after(config.shutdown_timeout_ms / 1000, stop)
    log.info("worker running", name=config.name, tables=len(config.tables()), pid=os.getpid(), **hot_path())
    try:
        return worker.run(stop)
    finally:
        if rest is not None:
            rest.close()


def _exit_after(bound_s: float, stop: threading.Event) -> None:
    """A stop that overruns its bound ends the process (exit 3): a hung broker must not keep a
    pod in Terminating forever."""

    def watch() -> None:
        stop.wait()
        if not threading.Event().wait(bound_s):
            log.error("graceful stop overran its bound; exiting", bound_s=bound_s)
            os._exit(3)

    threading.Thread(target=watch, name="shutdown-watchdog", daemon=True).start()
