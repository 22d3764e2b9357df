"""A real S3-compatible server for the payload store's tests: moto's server
mode (``python -m moto.server``), a process of its own on 127.0.0.1.

It speaks the S3 REST API as AWS does (path-style addressing, the 404 of a
missing key, ``NoSuchBucket``), so the payload store's S3 driver, boto3 and
every other S3 client reach it as they would reach MinIO or AWS: through
``AWS_ENDPOINT_URL`` and the usual credential variables (``environ``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from oma.runtime.dev_server import free_port, is_listening


class S3Server:
    """``moto.server`` on a free port, logging to ``log``; a context manager.
    ``bucket`` is the bucket the suite's S3 stores use (the caller creates it:
    ``create_bucket``)."""

    bucket = "oma-payloads"
    access_key = "oma-test-access"
    secret_key = "oma-test-secret-0123456789"

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        """The AWS variables a boto3 client reads to reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }

    def client(self) -> Any:
        """A boto3 S3 client of this server (the test's own look at the bucket)."""
        import boto3

        return boto3.session.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        ).client("s3", endpoint_url=self.endpoint)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def __enter__(self) -> S3Server:
        self._log = open(self.log, "ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not is_listening(f"127.0.0.1:{self.port}", 0.2):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"moto's S3 server did not start; see {self.log}")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
