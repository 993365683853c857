"""Debian's Pebble on 127.0.0.1 for the tests: a listener certificate of its own, its
management port on another free port, DNS-01 validation against the DNS server the test
names. Started as a subprocess, ready when its directory answers, stopped at teardown."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from provision.lab import pebble

PEBBLE = "/usr/bin/pebble"


def require_pebble() -> None:
    if os.access(PEBBLE, os.X_OK):
        return
    why = "Pebble is not installed (apt-get install pebble; make deps)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Pebble:
    port: int
    management: int
    bundle: Path                # the listener's root: acme.ca_bundle
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def directory(self) -> str:
        return f"https://127.0.0.1:{self.port}/dir"

    def roots(self) -> bytes:
        """Pebble's issuing root, from its management port (/roots/0)."""
        ctx = ssl.create_default_context(cafile=str(self.bundle))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.management}/roots/0",
                                    context=ctx, timeout=5) as r:
            return bytes(r.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@contextmanager
def pebble_server(tmp: Path, dns_server: str, eab: dict[str, str] | None = None,
                  port: int | None = None) -> Iterator[Pebble]:
    require_pebble()
    tmp.mkdir(parents=True, exist_ok=True)
    root, cert, key = pebble.listener_certificate(["127.0.0.1"])
    (tmp / "root.pem").write_bytes(root)
    (tmp / "cert.pem").write_bytes(cert)
    (tmp / "key.pem").write_bytes(key)
    p = Pebble(port or _free_port(), _free_port(), tmp / "root.pem", None, tmp / "pebble.log")  # type: ignore[arg-type]
    conf = pebble.config(f"127.0.0.1:{p.port}", f"127.0.0.1:{p.management}",
                         str(tmp / "cert.pem"), str(tmp / "key.pem"), eab)
    (tmp / "pebble.json").write_text(json.dumps(conf))
    with open(p.log, "wb") as log:
        p.process = subprocess.Popen(pebble.command(str(tmp / "pebble.json"), dns_server),
                                     stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **pebble.ENV})
    try:
        ctx = ssl.create_default_context(cafile=str(p.bundle))
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(p.directory, context=ctx, timeout=2).close()
                break
            except OSError:
                if p.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"pebble did not start:\n{p.log.read_text()}") from None
                time.sleep(0.1)
        yield p
    finally:
        p.stop()
