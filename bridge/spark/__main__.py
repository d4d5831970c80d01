"""`python -m bridge.spark flatten|mirror ...`, and the file spark-submit runs on a cluster
(`spark-submit --packages "$(cdc-bridge spark packages)" <this file> mirror ...`)."""

from __future__ import annotations

import sys

from bridge.cli.spark import main

if __name__ == "__main__":
    sys.exit(main())
