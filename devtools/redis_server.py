"""A redis-server of a test's or benchmark's own, on a free port (never the shared one), stopped, paused and
started at will: how the outage tests and the outage benchmark take Redis away and bring it back."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path


class PrivateRedis:
    """One redis-server process; ``start`` waits for its own "ready" log line, never for a length of time."""

    def __init__(self, workdir: str | Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = str(workdir)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.workdir,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if b"Ready to accept connections" in line:
                return
        raise RuntimeError(f"redis-server exited before it was ready (code {self.process.wait()})")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server cannot act on the terminate
            self.process.terminate()
            self.process.wait(timeout=30)

    def hang(self) -> None:
        """Pause the server: connections are accepted by the kernel and never answered (a hung Redis)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
