"""`python -m bridge.cli ...` is `cdc-bridge ...` (tests and benchmarks start workers this way)."""

import sys

from bridge.cli import main

sys.exit(main())
