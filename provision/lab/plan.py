"""The lab as data: names, addresses and the contents of every file, decided without I/O.

Everything is derived from the lab name so several labs run side by side:

* network namespaces  ``plab-<name>-<host>`` (plus ``-sw`` for the switch and ``-op`` for
  the operator);
* bridges and the switch side of every veth live in the lab's own *switch* namespace, so
  no interface of a lab ever appears in the machine's namespace and interface names
  (``br-pub``, ``gpu1-prv``, at most 15 characters) cannot collide between labs;
* subnets ``10.<octet>.<segment>.0/24`` and ``fdXX:XXXX:XXXX:<segment>::/64`` with
  ``octet`` and the ULA global ID hashed from the name;
* machine names ``<name>-<host>``, state dir ``/run/provision-lab/<name>``.

Segments: **pub** (operator, bastion), **prv** (bastion, gpu1..N, resolver's second leg
so the GPU hosts have a resolver without any routing), **dns** (operator, ns1, resolver).
Nobody forwards: the operator reaches gpu hosts only by SSH through the bastion.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from dataclasses import field
from typing import Any

from provision.errors import UsageError
from provision.frozen import frozen
from provision.render.env import render as _render

from . import pebble

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
ZONE = "lab.test"
TSIG_KEY_NAME = "lab-tsig"
DNS_PROVIDER = "rfc2136"  # the lab's BIND takes RFC 2136 updates (its zone and adopted ones)
STATE_ROOT = "/run/provision-lab"
DATA_ROOT = "/var/lib/provision-lab"
IFNAMSIZ = 15
# gpu N is .100+N on the private segment, where nothing else is above .80: 128 hosts
# (bench/fleet.sh's largest size) end at .228
MAX_GPUS = 128

SEGMENTS = {"pub": 1, "prv": 2, "dns": 3}

# Units the machine has enabled (or might) that a lab host must not start; per-role
# exceptions in `unmasked_for`. Masking = a /dev/null symlink in /etc/systemd/system.
MASKED_UNITS = (
    "postgresql.service", "postgresql@.service",
    "named.service", "bind9.service", "named-resolvconf.service",
    "unbound.service", "unbound-resolvconf.service", "pdns.service",
    "cron.service", "exim4.service", "ssh.socket", "rsyslog.service",
    "apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer",
    "e2scrub_reap.service", "fstrim.timer", "dpkg-db-backup.timer",
    "systemd-timesyncd.service", "systemd-pstore.service", "console-getty.service",
    "getty@.service", "container-getty@.service", "machines.target",
    "systemd-networkd.service", "systemd-networkd.socket", "systemd-resolved.service",
    "networking.service",
    # daemons Debian starts on install that no lab host asks for: iperf3 would listen on
    # *:5201 on every host, haproxy.service beside the door's own unit (provision-door)
    "iperf3.service", "haproxy.service",
)
UNMASKED_FOR = {
    "ns1": ("named.service", "bind9.service"),
    "resolver": ("unbound.service",),
}


class PlanError(UsageError):
    """A request the lab cannot be built from (bad name, too many GPUs)."""


@frozen
class Iface:
    segment: str          # pub | prv | dns
    name: str             # inside the node's namespace (eth0, eth1)
    switch_name: str      # the veth peer in the switch namespace
    ipv4: str
    ipv6: str


@frozen
class Node:
    """A host of the lab (container) or the operator (a bare namespace)."""

    name: str
    kind: str             # operator | mirror | bastion | gpu | ns1 | resolver
    netns: str
    machine: str
    ifaces: tuple[Iface, ...]

    @property
    def is_container(self) -> bool:
        return self.kind not in ("operator", "mirror")

    def on(self, segment: str) -> Iface | None:
        return next((i for i in self.ifaces if i.segment == segment), None)

    @property
    def primary(self) -> Iface:
        return self.ifaces[0]


@frozen
class LabPlan:
    name: str
    gpus: int
    dir: str
    state_dir: str
    octet: int
    ula: str              # fdXX:XXXX:XXXX (the /48)
    switch_netns: str
    nodes: tuple[Node, ...]
    venv: str
    repo: str | None
    extra_binds: tuple[str, ...] = field(default=())
    image: str = "default"  # default | cloud (see `cloud_image`)

    # --- lookups -----------------------------------------------------------------
    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def operator(self) -> Node:
        return self.node("operator")

    @property
    def containers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.is_container)

    @property
    def gpu_hosts(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == "gpu")

    def subnet4(self, segment: str) -> str:
        return f"10.{self.octet}.{SEGMENTS[segment]}.0/24"

    def subnet6(self, segment: str) -> str:
        return f"{self.ula}:{SEGMENTS[segment]}::/64"

    @property
    def supernet4(self) -> str:
        return f"10.{self.octet}.0.0/16"

    @property
    def supernet6(self) -> str:
        return f"{self.ula}::/48"

    def address(self, node: str, segment: str | None = None, v6: bool = False) -> str:
        n = self.node(node)
        iface = n.on(segment) if segment else n.primary
        if iface is None:
            raise KeyError(f"{node} is not on segment {segment}")
        return iface.ipv6 if v6 else iface.ipv4

    @property
    def paths(self) -> dict[str, str]:
        d = self.dir
        return {
            "inventory": f"{d}/inventory.yml",
            "identity": f"{d}/id_ed25519",
            "known_hosts": f"{d}/known_hosts",
            "ssh_config": f"{d}/ssh_config",
            "tsig_key": f"{d}/tsig.key",
            "team": f"{d}/team",
            "hosts": f"{d}/hosts",
            "state": f"{self.state_dir}/state.json",
            "pebble_bundle": f"{d}/pebble-listener.pem",  # acme.ca_bundle of the inventory
            "api_keys": f"{d}/api-keys",  # the model API's keys (alice, bob), 0600: the door keeps hashes
        }


# --- derivation ---------------------------------------------------------------------

def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise PlanError(f"invalid lab name {name!r} (lowercase letters, digits and '-', "
                        "starting with a letter or digit, at most 24 characters)")
    return name


def _digest(name: str) -> bytes:
    return hashlib.sha256(f"provision-lab:{name}".encode()).digest()


def octet_for(name: str) -> int:
    """Second octet of the lab's 10.x.0.0/16: 16..239, stable per name."""
    return 16 + int.from_bytes(_digest(name)[:2], "big") % 224


def ula_for(name: str) -> str:
    """An RFC 4193 /48 (fd + 40-bit global ID) derived from the name."""
    g = _digest(name)[2:7]
    # canonical groups (no leading zeros): addresses must compare equal to what
    # ipaddress (and so the inventory model) prints
    return f"fd{g[0]:02x}:{g[1] << 8 | g[2]:x}:{g[3] << 8 | g[4]:x}"


# host part per node (same on each of its segments); gpuN gets 100+N on prv
HOST_NUMBERS = {"operator": 100, "mirror": 80, "bastion": 10, "ns1": 53, "resolver": 54}
LAYOUT = {  # segments per kind, primary first
    "operator": ("pub", "dns"),
    # cloud flavour: a bare namespace on the private segment where tests serve what a real
    # host fetches from outside (an apt repository), since nothing routes to the operator
    "mirror": ("prv",),
    "bastion": ("pub", "prv"),
    "gpu": ("prv",),
    "ns1": ("dns",),
    "resolver": ("dns", "prv"),
}


def boot_timeout(containers: int, base: float) -> float:
    """How long `lab up` waits for its hosts: `base` for a lab of up to 8 containers, 1.5 s
    more for each beyond (they boot on the same cores: 128 GPU hosts took over a minute on
    two before the first of them logged in)."""
    return base + 1.5 * max(0, containers - 8)


def _host_number(name: str) -> int:
    if name.startswith("gpu"):
        return 100 + int(name[3:])
    return HOST_NUMBERS[name]


def make_plan(name: str, gpus: int = 2, directory: str | None = None, *, venv: str,
              repo: str | None, extra_binds: tuple[str, ...] = (), image: str = "default") -> LabPlan:
    check_name(name)
    if not 1 <= gpus <= MAX_GPUS:
        raise PlanError(f"--gpus must be between 1 and {MAX_GPUS} (got {gpus})")
    if image not in IMAGES:
        raise PlanError(f"--image must be one of {', '.join(IMAGES)} (got {image!r})")
    octet, ula = octet_for(name), ula_for(name)
    prefix = f"plab-{name}"
    nodes = []
    names = [("operator", "operator"), ("bastion", "bastion"),
             *[(f"gpu{i}", "gpu") for i in range(1, gpus + 1)],
             ("ns1", "ns1"), ("resolver", "resolver"),
             *([("mirror", "mirror")] if image == "cloud" else [])]
    for hname, kind in names:
        short = "op" if kind == "operator" else hname
        ifaces = []
        for idx, seg in enumerate(LAYOUT[kind]):
            num = _host_number(hname)
            ifaces.append(Iface(seg, f"eth{idx}", f"{short}-{seg}",
                                f"10.{octet}.{SEGMENTS[seg]}.{num}",
                                f"{ula}:{SEGMENTS[seg]}::{num}"))
        nodes.append(Node(hname, kind, f"{prefix}-{short}", f"{name}-{hname}", tuple(ifaces)))
    return LabPlan(name=name, gpus=gpus, dir=directory or f"{DATA_ROOT}/{name}",
                   state_dir=f"{STATE_ROOT}/{name}", octet=octet, ula=ula,
                   switch_netns=f"{prefix}-sw", nodes=tuple(nodes), venv=venv, repo=repo,
                   extra_binds=extra_binds, image=image)


def interface_names(plan: LabPlan) -> list[str]:
    """Every interface name the lab creates (for the ≤ 15 characters check)."""
    out = [f"br-{s}" for s in SEGMENTS]
    for n in plan.nodes:
        for i in n.ifaces:
            out += [i.name, i.switch_name]
    return out


# --- network: `ip -batch` scripts per namespace -------------------------------------

def switch_batch(plan: LabPlan) -> list[str]:
    lines = []
    for seg in SEGMENTS:
        lines += [f"link add br-{seg} type bridge mcast_snooping 0",
                  f"link set br-{seg} up"]
    for n in plan.nodes:
        for i in n.ifaces:
            lines += [f"link add {i.switch_name} type veth peer name {i.name} netns {n.netns}",
                      f"link set {i.switch_name} master br-{i.segment} up"]
    return lines


def node_batch(node: Node) -> list[str]:
    lines = ["link set lo up"]
    for i in node.ifaces:
        lines += [f"addr add {i.ipv4}/24 dev {i.name}",
                  f"addr add {i.ipv6}/64 dev {i.name} nodad",
                  f"link set {i.name} up"]
    return lines


# Machine-wide minimums: every booted container's systemd, journald & co. take inotify
# instances, all counted against root; the default 128 runs out at ~3 labs and boots stall.
HOST_MINIMUMS = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 524288}


def raise_to_minimums(current: dict[str, int]) -> dict[str, int]:
    """The machine sysctls to raise (never lowered)."""
    return {k: v for k, v in HOST_MINIMUMS.items() if current.get(k, 0) < v}


# sysctls per node namespace: nobody routes; no SLAAC/RA surprises.
def node_sysctls(node: Node) -> dict[str, str]:
    return {
        "net/ipv4/ip_forward": "0",
        "net/ipv6/conf/all/forwarding": "0",
        "net/ipv6/conf/default/accept_ra": "0",
        "net/ipv6/conf/all/accept_ra": "0",
    }


# --- container contents -------------------------------------------------------------

def masked_units(node: Node, unmask: tuple[str, ...] = ()) -> list[str]:
    keep = (*UNMASKED_FOR.get(node.kind, ()), *unmask)
    return [u for u in MASKED_UNITS if u not in keep]


# --- the "cloud image" flavour (`provision lab up --image cloud`) --------------------
# The default lab is kinder than a fresh cloud image. This flavour makes the bastion and
# the GPU hosts look like one: cloud-init's sshd drop-in enabling passwords (and Ubuntu's
# 60-cloudimg-settings.conf after it) instead of the lab's key-only 00- drop-in, no package
# lists and no apt sources (the lab has no Internet: the only sources are the ones a test
# declares), the dpkg lock held for a few seconds after boot as unattended-upgrades or
# cloud-init do, and the last GPU host on socket-activated sshd (Ubuntu 22.10+).

IMAGES = ("default", "cloud")
DPKG_LOCK_UNIT = "provision-lab-dpkg-lock.service"
DPKG_LOCK_SECONDS = 10
CLOUD_SSHD_DROPINS = {
    "50-cloud-init.conf": "PasswordAuthentication yes\n",
    "60-cloudimg-settings.conf": "PasswordAuthentication no\n",
}
# removed from the image (the overlay whites them out); directories keep existing, emptied
CLOUD_EMPTIED_DIRS = ("var/lib/apt/lists", "etc/apt/sources.list.d")
CLOUD_REMOVED_FILES = ("etc/apt/sources.list", "var/cache/apt/pkgcache.bin",
                       "var/cache/apt/srcpkgcache.bin")


def cloud_image(plan: LabPlan, node: Node) -> bool:
    """Whether `node` is built as a fresh cloud image (the managed hosts, not the DNS servers)."""
    return plan.image == "cloud" and node.kind in ("bastion", "gpu")


def socket_activated(plan: LabPlan, node: Node) -> bool:
    """The one host whose sshd is started by ssh.socket: the last GPU host, cloud flavour."""
    return cloud_image(plan, node) and node.name == plan.gpu_hosts[-1].name


def unmasked_units(plan: LabPlan, node: Node) -> tuple[str, ...]:
    return ("ssh.socket",) if socket_activated(plan, node) else ()


def cloud_files(plan: LabPlan, node: Node) -> dict[str, str]:
    """Files a cloud-flavour host gets (path relative to its root -> content)."""
    if not cloud_image(plan, node):
        return {}
    files = {f"etc/ssh/sshd_config.d/{k}": v for k, v in CLOUD_SSHD_DROPINS.items()}
    files[f"etc/systemd/system/{DPKG_LOCK_UNIT}"] = render(
        "dpkg-lock.service.j2", seconds=DPKG_LOCK_SECONDS)
    if socket_activated(plan, node):
        # the container boots for the first time (no machine-id), so systemd applies the
        # presets, which would enable ssh.service again: say what Ubuntu 22.10+ ships
        files["etc/systemd/system-preset/10-provision-lab.preset"] = (
            "# lab, cloud flavour: sshd started by ssh.socket, as on Ubuntu 22.10+\n"
            "enable ssh.socket\ndisable ssh.service\n")
    return files


def cloud_links(plan: LabPlan, node: Node) -> dict[str, str | None]:
    """Unit symlinks (path relative to the root -> target; None: remove the link)."""
    if not cloud_image(plan, node):
        return {}
    links: dict[str, str | None] = {
        f"etc/systemd/system/multi-user.target.wants/{DPKG_LOCK_UNIT}":
            f"/etc/systemd/system/{DPKG_LOCK_UNIT}"}
    if socket_activated(plan, node):
        links["etc/systemd/system/sockets.target.wants/ssh.socket"] = "/lib/systemd/system/ssh.socket"
        # ssh.service disabled (its wants link and its sshd.service alias gone): the socket starts it
        links["etc/systemd/system/multi-user.target.wants/ssh.service"] = None
        links["etc/systemd/system/sshd.service"] = None
    return links


def render(template: str, **ctx: Any) -> str:
    """A lab template (templates/lab/NAME) through the one environment."""
    return _render(f"lab/{template}", **ctx)


def zone_records(plan: LabPlan) -> list[tuple[str, str, str, int]]:
    """(name, type, value, ttl) of the lab.test zone as it starts."""
    recs: list[tuple[str, str, str, int]] = []
    for n in plan.containers:
        recs.append((n.name, "A", n.primary.ipv4, 300))
        recs.append((n.name, "AAAA", n.primary.ipv6, 300))
    recs.append(("app", "A", f"10.{plan.octet}.1.200", 300))
    return recs


def zone_file(plan: LabPlan, serial: int = 1) -> str:
    return render("db.zone.j2", zone=ZONE, serial=serial, ns1=plan.address("ns1"),
                  ns1_v6=plan.address("ns1", v6=True), records=zone_records(plan),
                  nameserver=None)


def adopted_zone_file(zone: str) -> str:
    """An adopted zone as it starts (SOA and NS only: `dns apply` adds its records); its
    nameserver is ns1 by its name in the lab's zone, which needs no glue in this one."""
    return render("db.zone.j2", zone=zone, serial=1, records=[], nameserver=f"ns1.{ZONE}.")


def zone_path(zone: str) -> str:
    return f"/var/lib/bind/db.{zone}"


def named_conf(plan: LabPlan, adopted: tuple[str, ...] = ()) -> str:
    """BIND's config: the lab's zone and the zones `lab adopt` added."""
    ns1 = plan.node("ns1").primary
    return render("named.conf.j2", zone=ZONE, key_name=TSIG_KEY_NAME,
                  listen4=[ns1.ipv4, "127.0.0.1"], listen6=[ns1.ipv6, "::1"],
                  key_file="/etc/bind/lab-tsig.key", zone_file=zone_path(ZONE),
                  adopted=[(z, zone_path(z)) for z in adopted])


def unbound_conf(plan: LabPlan, adopted: tuple[str, ...] = ()) -> str:
    r = plan.node("resolver")
    return render("unbound.conf.j2", zone=ZONE, adopted=list(adopted),
                  interfaces=[*(i.ipv4 for i in r.ifaces), *(i.ipv6 for i in r.ifaces),
                              "127.0.0.1", "::1"],
                  allow=[plan.supernet4, plan.supernet6, "127.0.0.0/8", "::1/128"],
                  stub_addrs=[plan.address("ns1"), plan.address("ns1", v6=True)])


def resolv_conf(plan: LabPlan, node: Node) -> str:
    """The resolver address this node can reach (dns segment, else the resolver's prv leg)."""
    r = plan.node("resolver")
    seg = "dns" if node.on("dns") else "prv"
    iface = r.on(seg)
    servers = [iface.ipv4] if iface and node.on(seg) else []
    return render("resolv.conf.j2", servers=servers, zone=ZONE)


def etc_hosts(plan: LabPlan, node: Node) -> str:
    entries = [(n.primary.ipv4, n.name) for n in plan.containers if n.name != node.name]
    return render("hosts.j2", name=node.name, zone=ZONE, entries=entries)


def sshd_config() -> str:
    return render("sshd_lab.conf.j2")


def logind_conf() -> str:
    """logind drop-in: user managers are never stopped (see the template for why)."""
    return render("logind-lab.conf.j2")


def sudoers(user: str = "admin") -> str:
    return render("sudoers.j2", user=user)


PEBBLE_DIR = "/etc/provision-lab/pebble"
PEBBLE_UNIT = "provision-lab-pebble.service"
PEBBLE_CAA_IDENTITY = f"pebble.{ZONE}"  # what a CAA record names to allow the lab's CA


def pebble_directory(plan: LabPlan) -> str:
    """The lab CA's ACME directory URL (Pebble on ns1's dns-segment address)."""
    return f"https://{plan.address('ns1')}:{pebble.ACME_PORT}/dir"


def pebble_files(plan: LabPlan) -> dict[str, str]:
    """ns1's Pebble: its config and unit (path in the container -> content); the listener
    certificate and key are made by the shell (`pebble.listener_certificate`)."""
    conf = pebble.config(f"{plan.address('ns1')}:{pebble.ACME_PORT}",
                         f"127.0.0.1:{pebble.MANAGEMENT_PORT}",  # roots and keys: loopback only
                         f"{PEBBLE_DIR}/cert.pem", f"{PEBBLE_DIR}/key.pem")
    unit = render("pebble.service.j2", env=pebble.ENV,
                  command=pebble.command(f"{PEBBLE_DIR}/pebble.json", f"{plan.address('ns1')}:53"))
    return {f"{PEBBLE_DIR}/pebble.json": json.dumps(conf, indent=2) + "\n",
            f"/etc/systemd/system/{PEBBLE_UNIT}": unit}


def unit_dropins(node: Node) -> dict[str, str]:
    """Drop-ins under /etc/systemd/system (path -> content)."""
    if node.kind == "resolver":
        # no root trust anchor update: it would try the Internet
        return {"unbound.service.d/lab.conf": render("unbound-dropin.conf.j2")}
    return {}


CGROUP_PARENT = "provision-lab"


def cgroup_of(plan: LabPlan, node: Node) -> str:
    """The container's own cgroup, relative to a hierarchy's root (ours in it).

    Without one, every container started from the same process gets the same cgroup
    subtree: nspawn (`--keep-unit`, no systemd on the machine) puts each payload in
    `<its cgroup>/payload`, so the containers' systemds share `payload/system.slice/*` and
    remove or kill each other's unit cgroups (a unit start then fails with 219/CGROUP).
    """
    return f"{CGROUP_PARENT}/{plan.name}/{node.name}"


def in_cgroups(command: list[str], cgroup_dirs: list[str]) -> list[str]:
    """`command`, run by a shell that first moves itself into each of `cgroup_dirs`."""
    if not cgroup_dirs:
        return command
    move = ('while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; '
            'shift; exec "$@"')
    return ["sh", "-c", move, "sh", *cgroup_dirs, "--", *command]


# /proc/sys/net writable in the container (nspawn mounts /proc/sys read-only): each lab host
# has a network namespace of its own, so its net.* settings (a cluster's ephemeral port
# range) are its own and touch nothing of the machine's
NSPAWN_ENV = {"SYSTEMD_NSPAWN_API_VFS_WRITABLE": "network"}


def nspawn_command(plan: LabPlan, node: Node, root: str) -> list[str]:
    """The container: booted, in the node's namespace, the venv and checkout bound read-only
    at the same paths (also under /tmp, where the container has its own tmpfs)."""
    binds = [plan.venv, *([plan.repo] if plan.repo else []), *plan.extra_binds]
    return [
        "systemd-nspawn", "-q", "-D", root, "--register=no", "--keep-unit",
        "--capability=CAP_NET_ADMIN,CAP_NET_RAW",
        f"--network-namespace-path=/run/netns/{node.netns}",
        "--boot", f"--machine={node.machine}", f"--hostname={node.name}",
        "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--console=read-only",
        *(f"--bind-ro={b}" for b in dict.fromkeys(binds)),
    ]


# --- operator-side files ------------------------------------------------------------

def known_hosts(plan: LabPlan, host_keys: dict[str, str]) -> str:
    """Lines `name,addr4,addr6[,...] key` for every address the operator or a bastion uses."""
    lines = []
    for n in plan.containers:
        key = host_keys[n.name].split()
        addrs = [n.name]
        for i in n.ifaces:
            addrs += [i.ipv4, i.ipv6]
        lines.append(f"{','.join(addrs)} {key[0]} {key[1]}")
    return "\n".join(lines) + "\n"


CLUSTER = "train"
EPHEMERAL_PORTS = (40000, 44999)


def cluster_doc(plan: LabPlan) -> dict[str, Any]:
    """Every GPU host trains together, on its v4 and v6 address, the kernel's ports for
    NCCL and Gloo narrowed to a range (each lab host is a network namespace: its own)."""
    return {"hosts": [n.name for n in plan.gpu_hosts],
            "addresses": {n.name: [n.primary.ipv4, n.primary.ipv6] for n in plan.gpu_hosts},
            "ephemeral_ports": list(EPHEMERAL_PORTS)}


DOOR_NAME = f"model.{ZONE}"


def model_api(api_keys: dict[str, str]) -> dict[str, Any]:
    """gpu1's public model API behind the door: the world may reach port 443 (the bastion
    stands for the internet), a name in the lab's zone (its certificate from the lab's CA),
    keys for alice and bob (`api_keys`: name -> digest), a few requests a second per address,
    so that a short loop shows the 429s."""
    return {"port": 8000, "expose": {"from": ["0.0.0.0/0", "::/0"]},
            "command": "/usr/bin/python3 -m http.server --bind {bind} {port}",
            "https": {"name": DOOR_NAME, "keys": dict(sorted(api_keys.items())),
                      "limits": {"per_address": "5/s", "burst": 5, "connections": 32}}}


def inventory_doc(plan: LabPlan, team_keys: dict[str, str], *, jupyter: bool,
                  api_keys: dict[str, str] | None = None) -> dict[str, Any]:
    p = plan.paths
    b = plan.node("bastion")
    prv = b.on("prv")
    assert prv is not None
    if jupyter:
        jupyter_svc: dict[str, Any] = {"venv": plan.venv}  # catalog: {venv}jupyter server --config={config}
    else:
        jupyter_svc = {"command": "python3 -m http.server --bind {bind} {port}"}
    records: dict[str, Any] = {
        n.name: {"type": "A", "values": [n.primary.ipv4], "ttl": 300} for n in plan.gpu_hosts}
    records["app"] = {"type": "A", "values": [f"10.{plan.octet}.1.200"], "ttl": 300}
    return {
        "version": 1,
        "defaults": {"user": "admin", "identity_file": p["identity"],
                     "known_hosts": p["known_hosts"]},
        "team": {
            "alice": {"keys": [team_keys["alice"]], "sudo": True,
                      "identity_file": f"{p['team']}/alice"},
            "bob": {"keys": [team_keys["bob"]], "identity_file": f"{p['team']}/bob"},
        },
        "bastions": {
            # the operator sits on the public segment: the only place SSH may come from
            "bastion": {"address": b.primary.ipv4,
                        "allow_ssh_from": [plan.subnet4("pub"), plan.subnet6("pub")],
                        "egress": [f"{prv.ipv4}/32", f"{prv.ipv6}/128"]},
        },
        "roles": {
            "gpu-server": {"services": {
                "jupyter": jupyter_svc,
                "tensorboard": {"logdir": "/srv/runs", "venv": plan.venv},
            }},
        },
        "hosts": {n.name: {"address": n.primary.ipv4, "via": "bastion", "roles": ["gpu-server"],
                           **({"services": {"model-api": model_api(api_keys)}}
                              if api_keys and n.name == "gpu1" else {})}
                  for n in plan.gpu_hosts},
        **({"clusters": {CLUSTER: cluster_doc(plan)}} if len(plan.gpu_hosts) >= 2 else {}),
        "acme": {"ca": pebble_directory(plan), "ca_bundle": p["pebble_bundle"],
                 "caa_identities": [PEBBLE_CAA_IDENTITY]},
        "dns": {
            "resolvers": [plan.address("resolver")],
            "zones": {ZONE: {"provider": DNS_PROVIDER, "server": plan.address("ns1"),
                             "tsig_key_file": p["tsig_key"], "records": records}},
        },
    }


# --- state --------------------------------------------------------------------------

def state_doc(plan: LabPlan, pids: dict[str, int], status: str) -> dict[str, Any]:
    return {
        "name": plan.name, "gpus": plan.gpus, "dir": plan.dir, "status": status,
        "venv": plan.venv, "repo": plan.repo, "extra_binds": list(plan.extra_binds),
        "image": plan.image, "pids": pids,
    }


def plan_from_state(state: dict[str, Any]) -> LabPlan:
    return make_plan(state["name"], state["gpus"], state["dir"], venv=state["venv"],
                     repo=state["repo"], extra_binds=tuple(state.get("extra_binds", ())),
                     image=state.get("image", "default"))


def is_lab_address(plan: LabPlan, address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(n) for n in (plan.supernet4, plan.supernet6))
