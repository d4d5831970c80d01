"""The mirror's fold alone (`bridge.spark.fold.events.fold_rows`) over a cached frame of N events
of 20 value columns (12 ints, 4 strings, a set, a list and a map with element changes; inserts,
updates and deletes, three events per key): wall time and CPU-seconds of the session's process
tree (the JVM and its Python workers) per run, the load beside each.

    python bench/spark_mirror_fold.py 100000                  # the fold of this tree
    git show df6d7de:bridge/spark/mirror_fold.py > /tmp/sql_fold.py
    python bench/spark_mirror_fold.py 100000 /tmp/sql_fold.py # the Spark SQL fold it replaced

The first of three runs pays the JVM's warm-up; the figures to compare are the later runs'.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.session import build_session
from bridge.spark.core.shape import ColumnShape

ENTRY = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.IntegerType())])
VALUES = [*(ColumnShape(f"c{i}", False, T.IntegerType()) for i in range(12)),
          *(ColumnShape(f"s{i}", False, T.StringType()) for i in range(4)),
          ColumnShape("tags", False, T.ArrayType(T.IntegerType()), None, "set", True),
          ColumnShape("hist", False, T.ArrayType(T.IntegerType()), None, "list", True),
          ColumnShape("attrs", False, T.ArrayType(ENTRY), None, "map", True)]
KEYS = [ColumnShape("pk", True, T.LongType()), ColumnShape("ck", True, T.IntegerType())]


def tree_cpu_seconds() -> float:
    """CPU-seconds of this process and its descendants (the JVM, pyspark's daemon and workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(name)] = int(fields[1])
        spent[int(name)] = sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
    me, total = os.getpid(), 0.0
    for pid, seconds in spent.items():
        up = pid
        while up and up != me:
            up = parents.get(up, 0)
        total += seconds if up == me else 0.0
    return total


def fold_module(path: str | None) -> Any:
    if path is None:
        from bridge.spark.fold import events as mirror_fold
        return mirror_fold
    spec = importlib.util.spec_from_file_location("other_mirror_fold", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def events(spark: Any, module: Any, n: int) -> Any:
    row = F.col("id")
    base = spark.range(n).select(row, (row % (n // 3)).alias("pk"), (row % 2).cast("int").alias("ck"))
    cells = []
    for i, column in enumerate(VALUES):
        if column.collection is None:
            value = (row + i).cast("int") if column.spark_type == T.IntegerType() else \
                F.concat(F.lit("v"), row.cast("string"))
            cells.append((F.when(row % (i + 2) != 1, F.struct(value.alias("value"))), value, None))
            continue
        added_type, removed_type = module.elements_types(column)
        if column.collection == "map":
            added = F.array(F.struct(F.concat(F.lit("k"), (row % 5).cast("string")).alias("key"),
                                     F.col("ck").alias("value")))
            removed = F.array(F.concat(F.lit("k"), (row % 3).cast("string")))
        else:
            added = F.array((row % 9).cast("int"))
            removed = F.array((row % 4).cast("int")) if column.collection == "set" else F.lit(None)
        elements = F.struct(added.cast(added_type).alias("added"), removed.cast(removed_type).alias("removed"))
        cells.append((None, None, elements))
    op = F.when(row % 7 == 0, "d").when(row % 3 == 0, "c").otherwise("u")
    event = module.data_event(VALUES, 1000 + row, row, op, F.lit(False), cells)
    return base.select("pk", "ck", event.alias("x"))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    module = fold_module(sys.argv[2] if len(sys.argv) > 2 else None)
    spark = build_session("local[2]", app_name="mirror-fold-bench")
    spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # as the mirror sets it
    parts = events(spark, module, n).persist()
    parts.count()
    for run in range(3):
        cpu, began = tree_cpu_seconds(), time.monotonic()
        module.fold_rows(parts, KEYS, VALUES).write.format("noop").mode("overwrite").save()
        cpu, wall = tree_cpu_seconds() - cpu, time.monotonic() - began
        print(f"run {run}: {n} events, {wall:.1f} s, {cpu:.1f} CPU-s, {n / cpu:,.0f} events per CPU-s, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    print("rows written:", module.fold_rows(parts, KEYS, VALUES).count())
    spark.stop()


if __name__ == "__main__":
    main()
