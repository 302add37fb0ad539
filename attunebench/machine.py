"""What the machine lets this process use, counted one way for the web server, the replay and the benchmarks.

Pure: no Django.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, which a container's CPU set or a task set narrows below
    the machine's CPU count (the CPU count on platforms without affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
