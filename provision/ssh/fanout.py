"""How many hosts to work on at once, and how many connections one sshd gets at once (pure).

A converge thread is mostly waiting on the network, so hosts in flight are bounded by what
they hold, not by the CPU alone: each host in flight holds a few file descriptors (its
socket to the first hop; during a confirmation a second chain; paramiko's pipes), and
paramiko's crypto runs in Python, so each core can keep only so many transports busy.

An sshd drops new connections at random once `MaxStartups` (default `10:30:100`: from 10
unauthenticated connections on, drop 30 %, rising to 100 % at 100) connections are waiting
to authenticate. Hosts share one connection per bastion during a run, but a bastion that is
itself converged gets its own session and confirmation logins, and callers without a run
open hops of their own, so connects through one bastion are capped below that start value.
"""

from __future__ import annotations

HOSTS_PER_CPU = 16
MIN_FORKS = 4
MAX_FORKS = 256
FDS_PER_HOST = 8  # socket + confirmation chain + paramiko pipes, with room to spare
FDS_RESERVED = 64  # stdio, the known_hosts file, libraries, the rich console
DEFAULT_MAX_STARTUPS = "10:30:100"
STARTUPS_HEADROOM = 2  # stay this far below sshd's MaxStartups start value


def default_forks(cpus: int | None, nofile: int | None) -> int:
    """Hosts worked on at once when `--forks` is not given: HOSTS_PER_CPU per core, at most
    what the open-file limit `nofile` (soft RLIMIT_NOFILE; None: unlimited) leaves room
    for, clamped to [MIN_FORKS, MAX_FORKS] (the minimum wins over a tiny file limit)."""
    by_cpu = max(1, cpus or 1) * HOSTS_PER_CPU
    by_files = MAX_FORKS if nofile is None or nofile < 0 else (nofile - FDS_RESERVED) // FDS_PER_HOST
    return max(MIN_FORKS, min(MAX_FORKS, by_cpu, by_files))


def connect_slots(max_startups: str = DEFAULT_MAX_STARTUPS,
                  headroom: int = STARTUPS_HEADROOM) -> int:
    """Connections allowed to be authenticating against one sshd at once: below the start
    value of its `MaxStartups` (`start:rate:full` or a plain number), at least 1."""
    start = max_startups.split(":", 1)[0].strip()
    if not (start.isascii() and start.isdigit()):  # '²'.isdigit(), but int('²') fails
        raise ValueError(f"MaxStartups {max_startups!r}: expected start:rate:full or a number")
    return max(1, int(start) - headroom)
