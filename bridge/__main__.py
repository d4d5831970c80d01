"""`python -m bridge ...` is `cdc-bridge ...`."""

import sys

from bridge.cli import main

sys.exit(main())
