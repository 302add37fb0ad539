"""CPU seconds of running processes, read from Linux /proc: where a benchmark's cores went.

The benchmarks start their servers (fake provider, web server, workers) on the same two cores as
the code they measure, so they report each one's share.
"""

from __future__ import annotations

import os
from pathlib import Path


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process and all its descendants (an ended one counts 0)."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended meanwhile
    return total
