"""SSH connections from the inventory: jump chains, the one host-key trust path, remote exec."""

from . import invoke_deferred

invoke_deferred.install()  # before any module here imports paramiko: see there
