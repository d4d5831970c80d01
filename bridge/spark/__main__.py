"""`python -m bridge.spark flatten|mirror ...`, and the file spark-submit runs on a cluster
(`spark-submit --master spark://... --packages "$(cdc-bridge spark packages)" --conf
spark.pyspark.python=... <this file> mirror ...`: docs/spark.md, "On a standalone cluster")."""

from __future__ import annotations

import sys

from bridge.spark.command import main

if __name__ == "__main__":
    sys.exit(main())
