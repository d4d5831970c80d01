"""An optional Spark standalone cluster beside the stack: one master and two workers (one core and
1 GiB for executors each), run from the installed pyspark's own jars (`bin/spark-class`, as
Spark's `sbin/start-master.sh` does, without its daemonising). Opt-in: `cdc-bridge stack up
--spark-cluster`, or `StackManager(..., spark_cluster=True)`; the default stack does not grow.

Jobs reach it at `spark://127.0.0.1:<spark_master_port>` (docs/spark.md, "On a standalone
cluster"). The workers start executors with the Python the driver names (spark.pyspark.python),
so a venv with the project and its `spark` extra serves driver and executors alike.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.error
import urllib.request
from pathlib import Path

from bridge_devstack.stack.layout import Endpoints, StackLayout
from bridge_devstack.stack.process import StackError, port_open
from bridge_devstack.stack.services import Service

WORKERS = 2
# What each worker offers its executors: with the jobs' default --executor-memory of 1g, one
# executor per worker, two in all on a 2-core machine.
WORKER_CORES = 1
WORKER_MEMORY = "1g"
# The master and worker daemons only schedule and launch executors: Spark's default of 1 GiB each
# (SPARK_DAEMON_MEMORY) is far more than they use.
DAEMON_HEAP = "256m"


def spark_home() -> Path:
    """The installed pyspark's folder: its `jars/` and `bin/spark-class` are a Spark distribution's."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise StackError("pyspark is not installed: the Spark cluster runs from its jars; run scripts/setup --spark")
    return Path(spec.origin).parent


class _SparkDaemon(Service):
    heap = DAEMON_HEAP
    stop_grace_s = 20.0

    def fetch(self) -> bool:
        spark_home()  # nothing to download: pyspark's jars are the cluster's
        return False

    def prepare(self) -> None:
        for folder in ("work", "conf"):
            (self.home / folder).mkdir(parents=True, exist_ok=True)

    def environment(self) -> dict[str, str]:
        return {"SPARK_HOME": str(spark_home()), "SPARK_DAEMON_MEMORY": self.heap,
                "SPARK_LOG_DIR": str(self.home), "SPARK_LOCAL_IP": self.endpoints.host,
                # spark-class would read $SPARK_HOME/conf/spark-env.sh; an empty folder of our own
                "SPARK_CONF_DIR": str(self.home / "conf")}

    def _spark_class(self, main: str, *arguments: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main, *arguments]

    def _master_state(self) -> dict[str, object] | None:
        """The master's own view (its web UI's JSON), None while it does not answer."""
        url = f"http://{self.endpoints.host}:{self.endpoints.spark_master_ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                state = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None


class SparkMaster(_SparkDaemon):
    name = "spark-master"
    main_marker = "org.apache.spark.deploy.master.Master"

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.endpoints.spark_master_port, self.endpoints.spark_master_ui_port)

    @property
    def endpoint(self) -> str:
        return self.endpoints.spark_master_url

    def command(self) -> list[str]:
        return self._spark_class(self.main_marker, "--host", self.endpoints.host,
                                 "--port", str(self.endpoints.spark_master_port),
                                 "--webui-port", str(self.endpoints.spark_master_ui_port))

    def ready(self) -> bool:
        if not port_open(self.endpoints.host, self.endpoints.spark_master_port):
            return False
        state = self._master_state()
        return state is not None and state.get("status") == "ALIVE"


class SparkWorker(_SparkDaemon):
    main_marker = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, index: int, layout: StackLayout, endpoints: Endpoints) -> None:
        self.index = index
        self.name = f"spark-worker-{index}"
        super().__init__(layout, endpoints)

    @property
    def port(self) -> int:
        return self.endpoints.spark_worker_port + self.index - 1

    @property
    def ui_port(self) -> int:
        return self.endpoints.spark_worker_ui_port + self.index - 1

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.port, self.ui_port)

    @property
    def endpoint(self) -> str:
        return f"{self.endpoints.host}:{self.port} ({WORKER_CORES} core, {WORKER_MEMORY})"

    def command(self) -> list[str]:
        return self._spark_class(self.main_marker, self.endpoints.spark_master_url,
                                 "--host", self.endpoints.host, "--port", str(self.port),
                                 "--webui-port", str(self.ui_port), "--cores", str(WORKER_CORES),
                                 "--memory", WORKER_MEMORY, "--work-dir", str(self.home / "work"))

    def ready(self) -> bool:
        """Registered with the master and alive there (a worker whose port is open may not be yet)."""
        if not port_open(self.endpoints.host, self.port):
            return False
        state = self._master_state()
        workers = state.get("workers") if state is not None else None
        if not isinstance(workers, list):
            return False
        return any(isinstance(w, dict) and w.get("port") == self.port and w.get("state") == "ALIVE" for w in workers)


def spark_cluster_services(layout: StackLayout, endpoints: Endpoints) -> list[Service]:
    return [SparkMaster(layout, endpoints), *(SparkWorker(i, layout, endpoints) for i in range(1, WORKERS + 1))]


SPARK_CLUSTER = ("spark-master", *(f"spark-worker-{i}" for i in range(1, WORKERS + 1)))
