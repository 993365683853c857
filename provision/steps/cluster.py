"""A cluster member's kernel and job environment (pure diff); its firewall is the firewall
step's (`provision.firewall.rules.cluster_rules`).

- The ephemeral port range (`net.ipv4.ip_local_port_range`), where NCCL and Gloo bind:
  written to /etc/sysctl.d, set in the kernel and read back there by the batch, and
  compared live on every plan (a file that says one thing while the kernel runs another is
  a change). A range no longer declared: our file goes and the kernel's default comes back.
- One environment file per cluster (`/etc/provision/clusters/NAME.env`): MASTER_ADDR,
  MASTER_PORT, NNODES, NODE_RANK, and NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME set to the
  interface that holds the member's address (from the addresses fact; a member that holds
  none is refused, naming the address). `provision exec cluster:NAME` reads it.
  Every value in it is validated text (names, IP literals, interface names), so the file is
  safe to `.` from a shell.
"""

from __future__ import annotations

import posixpath

from provision.cluster_job import ENV_DIR, env_path
from provision.facts import Facts, Request
from provision.facts.addresses import SPEC as ADDRESSES
from provision.facts.sysctl import PORT_RANGE, port_range
from provision.facts.sysctl import SPEC as SYSCTL
from provision.frozen import frozen
from provision.inventory.model import Cluster, Host, Inventory
from provision.render.env import render

from .actions import Action, RemoveFile, SetSysctl, WriteFile
from .files import diff_file
from .refused import Refused

SYSCTL_FILE = "/etc/sysctl.d/60-provision-ports.conf"
KERNEL_DEFAULT = (32768, 60999)  # Linux's own ip_local_port_range


def env_file(inv: Inventory, host: Host, cluster: Cluster, interface: str) -> str:
    return render("cluster.env.j2", cluster=cluster, host=host.name, path=env_path(cluster.name),
                  rank=cluster.rank(host.name), master_addr=cluster.master_address(),
                  interface=interface)


@frozen
class ClusterStep:
    inv: Inventory
    host: Host
    name: str = "cluster"

    @property
    def clusters(self) -> tuple[Cluster, ...]:
        return self.inv.clusters_of(self.host.name)

    def request(self) -> Request:
        return Request(files=(SYSCTL_FILE,), prefixes=(ENV_DIR + "/",),
                       facts=("sysctl", ADDRESSES.name) if self.clusters else ("sysctl",))

    def diff(self, facts: Facts) -> list[Action]:
        return [*self._ports(facts), *self._envs(facts)]

    def _ports(self, facts: Facts) -> list[Action]:
        want = self.host.ephemeral_ports
        live = port_range(facts.get(SYSCTL))
        fact = facts.file(SYSCTL_FILE)
        if want is None:
            if not fact.exists:
                return []
            return [RemoveFile(SYSCTL_FILE, old=fact.content),
                    SetSysctl(PORT_RANGE, f"{KERNEL_DEFAULT[0]} {KERNEL_DEFAULT[1]}", "the kernel's default")]
        content = render("sysctl-ports.conf.j2", host=self.host.name, low=want[0], high=want[1])
        out: list[Action] = list(diff_file(fact, WriteFile(SYSCTL_FILE, content)))
        if out or live != want:
            why = (f"the kernel runs {live[0]}-{live[1]}" if live and live != want else
                   "unknown in the kernel" if live is None else "written anew")
            out.append(SetSysctl(PORT_RANGE, f"{want[0]} {want[1]}", why, SYSCTL_FILE))
        return out

    def _envs(self, facts: Facts) -> list[Action]:
        out: list[Action] = []
        wanted = {env_path(c.name) for c in self.clusters}
        addresses = facts.get(ADDRESSES)
        for c in self.clusters:
            interface = None
            mine = c.addresses_of(self.host.name)
            for a in mine:
                interface = addresses.interface_of(a)
                if interface:
                    break
            if interface is None:
                raise Refused(f"cluster {c.name}: {self.host.name} holds none of its training "
                              f"addresses ({', '.join(mine)}): no interface for NCCL and Gloo; "
                              f"fix clusters.{c.name}.addresses")
            out += diff_file(facts.file(env_path(c.name)),
                             WriteFile(env_path(c.name), env_file(self.inv, self.host, c,
                                                                  interface)))
        for f in facts.prefixed(ENV_DIR + "/"):
            if f.path not in wanted and posixpath.dirname(f.path) == ENV_DIR \
                    and f.path.endswith(".env"):
                out.append(RemoveFile(f.path, old=f.content))
        return out

    @classmethod
    def build(cls, inv: Inventory, host: Host) -> ClusterStep:
        return cls(inv, host)
