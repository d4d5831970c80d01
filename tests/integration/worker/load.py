"""CPU burners for the load tier: busy processes at about twice the machine's cores, started and
stopped by pid (issue 42: the machine the suite and the bench run on is shared and often at
load 3-6 on 2 cores; what users run on a busy node is what the load tier tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

BURN = "while True:\n    pass\n"


def burner_count() -> int:
    return 2 * (os.cpu_count() or 1)


@contextmanager
def cpu_burners(count: int | None = None) -> Iterator[list[int]]:
    """`count` (default 2x cores) busy Python processes, lowest priority not asked for (they
    compete with the workers as other tenants' processes would); SIGKILLed by pid on exit."""
    processes = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count or burner_count())]
    try:
        yield [p.pid for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
