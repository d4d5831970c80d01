"""`python tests/faults/skewed_clock.py SKEW_S run --config F`: `cdc-bridge` on a host whose wall
clock is SKEW_S seconds off (ahead when positive). Only the Python process's clock moves (as
libfaketime would move it, which this machine does not have); Cassandra, Kafka and the writers
keep the true time."""

import sys
import time

skew_s = float(sys.argv.pop(1))
true_time, true_time_ns = time.time, time.time_ns
time.time = lambda: true_time() + skew_s
time.time_ns = lambda: true_time_ns() + int(skew_s * 1e9)

from bridge.cli import main  # noqa: E402  (after the clock is moved: defaults bind time.time at import)

sys.exit(main())
