"""Whether two history outputs (`cdc-bridge spark history --output`) hold the same versions: every
table under both roots compared row for row, every column (maps as sorted entries), both ways.

    .venv/bin/python bench/history_equal.py ROOT_A ROOT_B

Used to check a change to how the history runs (e.g. its micro-batch size) against the versions
of an earlier run over the same topics. Prints one JSON object per table; exits 1 on a difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge.spark.session import build_session


def tables(root: Path) -> set[str]:
    """`<keyspace>/<table>` of every history table (the `_cdc_*` stores left out)."""
    return {f"{log.parent.parent.name}/{log.parent.name}" for log in root.glob("*/*/_delta_log")
            if not log.parent.parent.name.startswith("_")}


def comparable(frame: DataFrame) -> DataFrame:
    return frame.select(*[F.array_sort(F.map_entries(F.col(f"`{f.name}`"))).alias(f.name)
                          if isinstance(f.dataType, T.MapType) else F.col(f"`{f.name}`")
                          for f in frame.schema.fields])


def main() -> None:
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    spark = build_session("local[2]")
    differ = False
    for name in sorted(tables(a) | tables(b)):
        left, right = (comparable(spark.read.format("delta").load(str(root / name))) for root in (a, b))
        right = right.select(*left.columns)
        only_a, only_b = left.exceptAll(right).count(), right.exceptAll(left).count()
        differ |= bool(only_a or only_b)
        print(json.dumps({"table": name, "rows_a": left.count(), "rows_b": right.count(), "only_in_a": only_a,
                          "only_in_b": only_b}))
    spark.stop()
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
