"""Enter a named network namespace from the current thread (no child process needed).

`setns(CLONE_NEWNET)` changes only the calling thread, so probes can run in parallel
threads, each inside a different lab namespace; sockets keep the namespace they were
created in. Root (CAP_SYS_ADMIN) required.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000
NETNS_RUN_DIR = "/run/netns"

@functools.cache
def _libc() -> ctypes.CDLL:
    # The process's own symbols (libc among them): ctypes.util.find_library would run
    # ldconfig in a subprocess, at import time of everything that imports the lab.
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(name_or_path: str) -> Iterator[None]:
    """Run the body of the `with` in network namespace `name` (or a /proc/…/ns/net path)."""
    path = name_or_path if "/" in name_or_path else f"{NETNS_RUN_DIR}/{name_or_path}"
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(f"{NETNS_RUN_DIR}/{name}").st_ino
    except FileNotFoundError:
        return None


def pids_in_netns(inodes: set[int]) -> dict[int, int]:
    """pid -> netns inode, for every process whose network namespace is one of `inodes`."""
    found: dict[int, int] = {}
    if not inodes:
        return found
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            link = os.readlink(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        ino = int(link[link.index("[") + 1 : -1])
        if ino in inodes:
            found[int(entry)] = ino
    return found
