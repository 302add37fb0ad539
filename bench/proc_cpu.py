"""CPU seconds of running processes, read from Linux /proc: where a benchmark's cores went.

The benchmarks start their servers (fake provider, web server, workers) on the same two cores as
the code they measure, so they report each one's share.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left
from pathlib import Path


def tree_cpu_by_process(pid: int) -> dict[tuple[int, int], float]:
    """User + system CPU seconds of a live process and each of its live descendants.

    Keyed by (pid, start time in clock ticks), so a pid the system reuses for a new process is a
    new key, never the continuation of the one that ended.
    """
    seconds: dict[tuple[int, int], float] = {}
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            seconds[(current, int(fields[19]))] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended meanwhile
    return seconds


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process and all its descendants (an ended one counts 0)."""
    return sum(tree_cpu_by_process(pid).values())


class CpuTrace:
    """CPU seconds of process trees over wall time, sampled in a thread, to read off any window afterwards.

    Why: a benchmark's window (first request to last answer, say) is known only afterwards, from the
    provider's clock, and a child that exits before the window closes must keep the CPU it used, so
    each process's last reading is kept rather than re-summing the live tree. What it misses: up to one
    interval of CPU of a process that ends between samples, its own sampling, and anything else on
    the machine, so a ceiling computed from it is the best case.
    """

    def __init__(self, pids: list[int], interval_s: float = 0.02) -> None:
        self._pids, self._interval = pids, interval_s
        self._last: dict[tuple[int, int], float] = {}
        self._samples: list[tuple[float, float]] = []  # (epoch seconds, CPU seconds so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-trace", daemon=True)

    def __enter__(self) -> CpuTrace:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        for pid in self._pids:
            self._last.update(tree_cpu_by_process(pid))
        self._samples.append((time.time(), sum(self._last.values())))

    def at(self, moment: float) -> float:
        """CPU seconds used by the traced trees up to ``moment`` (epoch seconds), interpolated."""
        samples = list(self._samples)  # one consistent list, even while the thread samples
        i = bisect_left(samples, moment, key=lambda sample: sample[0])
        if i == 0:
            return samples[0][1]
        if i >= len(samples):
            return samples[-1][1]
        (t0, c0), (t1, c1) = samples[i - 1], samples[i]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    def between(self, start: float, end: float) -> float:
        """CPU seconds the traced trees used from ``start`` to ``end`` (epoch seconds)."""
        return self.at(end) - self.at(start)


def reference_loop_s(rounds: int = 1000) -> float:
    """CPU seconds this machine takes, just now, for a fixed mix of what a replay's CPU goes to.

    Why: the machines here are shared and their speed drifts by half from one hour to the next, so a
    figure of CPU per call means little without the machine's speed beside it. The mix (building
    small objects and dicts, JSON both ways, string work) is the kind a call's client spends its CPU on;
    a bare arithmetic loop missed most of the drift.
    """
    import json

    started = time.process_time()
    for round_ in range(rounds):
        message = {"role": "user", "content": f"turn {round_} " + "words " * 200, "meta": list(range(50))}
        body = json.dumps({"model": "m", "messages": [message] * 8, "temperature": 0})
        parsed = json.loads(body)
        _ = sorted({f"k{i}": str(v) for i, v in enumerate(parsed["messages"][0]["meta"])}.items())
        _ = [type("Row", (), {"value": i})() for i in range(20)]
    return time.process_time() - started
