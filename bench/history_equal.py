"""Whether two history outputs (`cdc-bridge spark history --output`) hold the same versions: every
table under both roots compared row for row, every column (`spark_mirror_backlog.differences`), both ways.

    .venv/bin/python bench/history_equal.py ROOT_A ROOT_B

Used to check a change to how the history runs (e.g. its micro-batch size) against the versions
of an earlier run over the same topics. Prints one JSON object per table; exits 1 on a difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_mirror_backlog import differences

from bridge.spark.core.session import build_session


def tables(root: Path) -> set[str]:
    """`<keyspace>/<table>` of every history table (the `_cdc_*` stores left out)."""
    return {f"{log.parent.parent.name}/{log.parent.name}" for log in root.glob("*/*/_delta_log")
            if not log.parent.parent.name.startswith("_")}


def main() -> None:
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    spark = build_session("local[2]")
    differ = False
    for name in sorted(tables(a) | tables(b)):
        found = differences(*(spark.read.format("delta").load(str(root / name)) for root in (a, b)))
        differ |= bool(found["only_here"] or found["only_there"])
        print(json.dumps({"table": name, **found}))
    spark.stop()
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
