"""The shell that talks to hosts: gather facts, converge, commit-confirmed (I/O, decides nothing)."""

import provision.ssh  # noqa: F401  # first: it defers paramiko's `import invoke` (ssh/invoke_deferred.py)
