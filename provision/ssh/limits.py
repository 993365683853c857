"""This machine's limits (I/O): how many hosts to work on at once when `--forks` is not given."""

from __future__ import annotations

import os
import resource

from .fanout import default_forks


def machine_forks() -> int:
    """`--forks` when not given: from this machine's CPUs and open-file limit."""
    try:
        cpus: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return default_forks(cpus, None if soft == resource.RLIM_INFINITY else soft)
