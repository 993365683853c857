"""A cluster's job environment on its members (pure): where the cluster step writes it, and
the command line `provision exec cluster:NAME -- CMD` sends, which reads it first."""

from __future__ import annotations

from shlex import quote

from provision.inventory.model import CLUSTER_PREFIX, Cluster, Inventory

ENV_DIR = "/etc/provision/clusters"


def env_path(cluster: str) -> str:
    return f"{ENV_DIR}/{cluster}.env"


def cluster_of(inv: Inventory, patterns: list[str]) -> Cluster | None:
    """The cluster a selection names (`cluster:NAME`, alone), None when it names none.
    ValueError when the selection mixes one with other patterns or names no cluster: each
    member must get its own cluster's environment, and nothing else may."""
    named = [p for p in patterns if p.startswith(CLUSTER_PREFIX)]
    if not named:
        return None
    if len(patterns) > 1:
        raise ValueError(f"{named[0]} selects a cluster's members and gives each its "
                         "environment: name it alone")
    name = named[0][len(CLUSTER_PREFIX):]
    cluster = inv.cluster(name)
    if cluster is None:
        known = ", ".join(c.name for c in inv.clusters) or "none in the inventory"
        raise ValueError(f"no cluster {name!r} (clusters: {known})")
    return cluster


def job_command(cluster: Cluster, line: str) -> str:
    """`line` run after the member's environment file is read (exported); a member the
    cluster step never reached says so instead of starting a job without it."""
    path = quote(env_path(cluster.name))
    return (f"[ -r {path} ] || {{ echo \"provision: {path} is missing: this host is not set "
            f"up for cluster {cluster.name} yet (run provision apply)\" >&2; exit 127; }}; "
            f"set -a; . {path}; set +a; {line}")
