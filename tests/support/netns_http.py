"""A directory served over HTTP by Python's http.server inside a network namespace (the
lab's package mirrors: tests/lab/apt_repo.py, tests/support/package_index.py), and the
stopping of a server process the tests started."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from provision.lab.netns import in_netns


def stop(proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serve_directory(netns: str, address: str, root: Path, port: int, ready: str) -> Iterator[str]:
    """http.server on ADDRESS:PORT in `netns`, serving `root`; yields its base URL once a
    real GET of `ready` (a path below it) answers 200."""
    proc = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "http.server",
                             "--bind", address, "--directory", str(root), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://{address}:{port}"
    try:
        deadline = time.monotonic() + 30
        with in_netns(netns):
            while True:
                assert proc.poll() is None, f"http.server exited {proc.returncode}"
                try:
                    with urllib.request.urlopen(f"{url}{ready}", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                assert time.monotonic() < deadline, f"http.server at {url} never answered"
                time.sleep(0.1)
        yield url
    finally:
        stop(proc)
