"""On a cluster, the executors' Python must have what the tasks import: `bridge` itself (the
mirror's fold, flatten's producing tasks), confluent-kafka, orjson, pyarrow and pandas (the
`spark` extra). The executors run the interpreter the driver names (`spark.pyspark.python`, else
`python3` on each worker's PATH), which a driver in a virtualenv does not name by itself. Without
the check below the first micro-batch fails four times per task with a ModuleNotFoundError deep in
a Python worker's traceback; with it the job ends at once with one line naming the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from bridge.spark.core.errors import SparkJobError

REQUIRED = ("bridge", "confluent_kafka", "orjson", "pyarrow", "pandas")


def check_executor_python(spark: Any) -> None:
    """Raise SparkJobError if an executor's Python lacks a module of REQUIRED (not in local mode,
    where the tasks run this very interpreter)."""
    context = spark.sparkContext
    if context.master.startswith("local"):
        return
    modules = REQUIRED

    # Nested, so cloudpickle ships it by value: a function of this module would be pickled by
    # reference, and unpickling it would itself fail on an executor without `bridge`.
    def probe(_: Iterable[int]) -> Iterator[tuple[str, tuple[str, ...]]]:
        import importlib.util
        import sys

        yield sys.executable, tuple(m for m in modules if importlib.util.find_spec(m) is None)

    slots = max(1, int(context.defaultParallelism))
    missing = {(python, names) for python, names in
               context.parallelize(range(slots), slots).mapPartitions(probe).collect() if names}
    if missing:
        python, names = sorted(missing)[0]
        raise SparkJobError(
            f"the executors' Python ({python}) cannot import {', '.join(names)}: install the project with its "
            "`spark` extra there and name that interpreter with --conf spark.pyspark.python=PATH (docs/spark.md, "
            "\"On a standalone cluster\")")
