"""How many worker processes `worker.processes=auto` means: the CPUs this process may run on.

`os.cpu_count()` is the host's count, which in a container with a CPU limit is far more than it
may use: N interpreters sharing a quota of 2 CPUs only add switching and memory. So the count is
the scheduler affinity (`taskset`, cpusets), bounded by the cgroup v2 quota (`cpu.max`: `<quota>
<period>` in microseconds, or `max` for none), rounded up (1.5 CPUs are worth two processes),
and at least 1. The arithmetic is a pure function over the file's text, tested without a cgroup.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cpus_from(affinity: int, cpu_max: str | None) -> int:
    """The usable CPUs given the affinity's size and the text of `cpu.max` (None: no such file)."""
    usable = max(1, affinity)
    parts = (cpu_max or "").split()
    if not parts or parts[0] == "max":
        return usable
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100_000  # the kernel's default period
    except ValueError:
        return usable  # unreadable: the affinity alone
    if quota > 0 and period > 0:
        usable = min(usable, math.ceil(quota / period))
    return usable


def cgroup_cpu_max(proc_self_cgroup: str, root: Path = CGROUP_ROOT) -> str | None:
    """The text of this process's cgroup v2 `cpu.max` (the line `0::/path` of /proc/self/cgroup),
    or None on cgroup v1 or without the file (then no quota bounds the count)."""
    for line in proc_self_cgroup.splitlines():
        hierarchy, _, path = line.partition("::")
        if hierarchy == "0" and path:
            try:
                return (root / path.lstrip("/") / "cpu.max").read_text()
            except OSError:
                return None
    return None


def available_cpus() -> int:
    """The CPUs this process may use now (affinity and cgroup quota), at least 1."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        affinity = os.cpu_count() or 1
    try:
        cpu_max = cgroup_cpu_max(Path("/proc/self/cgroup").read_text())
    except OSError:
        cpu_max = None
    return cpus_from(affinity, cpu_max)


def process_count(setting: str) -> int:
    """`worker.processes` as a number (the model has already refused anything else)."""
    return available_cpus() if setting == "auto" else int(setting)
