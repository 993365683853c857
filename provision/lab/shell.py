"""The lab's imperative shell: namespaces, overlays, keys, containers. Decides nothing.

Every decision (names, addresses, file contents) comes from `plan.py`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import yaml

from provision.door import keys as door_keys
from provision.errors import OperationError
from provision.inventory import load_inventory
from provision.render import render_ssh_config
from provision.text import printable_lines

from . import pebble
from . import plan as P
from .netns import NETNS_RUN_DIR, in_netns, netns_inode, pids_in_netns
from .state import (
    container_leader,
    is_nspawn,
    lock_path,
    pid_alive,
    write_state,
)

BOOT_TIMEOUT = 90.0
NSPAWN_RUN = "/run/systemd/nspawn"
STOP_GRACE = 3.5


class LabError(OperationError):
    pass


def log(msg: str) -> None:
    print(printable_lines(msg), file=sys.stderr, flush=True)  # quotes the containers' output


def run(args: list[str], *, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, input=input, check=check, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        raise LabError(f"{' '.join(args)} failed ({e.returncode}): {e.stderr.strip()}") from None


def parallel(fns: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run callables in threads; raise the first error after all finished."""
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def wrap(key: str, fn: Callable[[], Any]) -> None:
        try:
            results[key] = fn()
        except BaseException as e:
            errors[key] = e

    threads = [threading.Thread(target=wrap, args=(k, f), daemon=True) for k, f in fns.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        key, err = next(iter(errors.items()))
        if isinstance(err, LabError):
            raise err
        raise LabError(f"{key}: {err}") from err
    return results


# --- keys -------------------------------------------------------------------------

def ensure_keypair(path: str, comment: str) -> str:
    if not os.path.exists(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path])
    return Path(path + ".pub").read_text().strip()


def ensure_api_key(path: str) -> str:
    """A model API key for the lab's door, kept 0600 for the demo and the tests; its digest
    (what the inventory holds)."""
    if not os.path.exists(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _create_private(path, door_keys.new_key() + "\n")
    return door_keys.digest(Path(path).read_text().strip())


def _create_private(path: str, text: str) -> None:
    """A new file only its owner reads (0600 from the start, never an existing one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def ensure_tsig(path: str) -> None:
    if not os.path.exists(path):
        _create_private(path, run(["tsig-keygen", "-a", "hmac-sha256", P.TSIG_KEY_NAME]).stdout)


# --- network ----------------------------------------------------------------------

def netns_list() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_RUN_DIR))
    except FileNotFoundError:
        return []


def ensure_host_limits() -> None:
    current = {k: int(Path(f"/proc/sys/{k}").read_text()) for k in P.HOST_MINIMUMS}
    for key, value in P.raise_to_minimums(current).items():
        Path(f"/proc/sys/{key}").write_text(f"{value}\n")
        log(f"raised {key.replace('/', '.')} from {current[key]} to {value} (many containers)")


def build_network(plan: P.LabPlan) -> None:
    for ns in [plan.switch_netns, *(n.netns for n in plan.nodes)]:
        run(["ip", "netns", "add", ns])
    run(["ip", "-n", plan.switch_netns, "-batch", "-"], input="\n".join(P.switch_batch(plan)) + "\n")
    # the switch carries frames only: no addresses, no IPv6 autoconf on its ports
    run(["ip", "netns", "exec", plan.switch_netns, "sysctl", "-q", "-w",
         "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])

    def setup(node: P.Node) -> None:
        run(["ip", "netns", "exec", node.netns, "sysctl", "-q", "-w",
             *(f"{k.replace('/', '.')}={v}" for k, v in P.node_sysctls(node).items())])
        run(["ip", "-n", node.netns, "-batch", "-"], input="\n".join(P.node_batch(node)) + "\n")

    parallel({n.name: partial(setup, n) for n in plan.nodes})
    op = Path("/etc/netns") / plan.operator.netns
    op.mkdir(parents=True, exist_ok=True)
    (op / "resolv.conf").write_text(P.resolv_conf(plan, plan.operator))


# --- container roots ----------------------------------------------------------------

def host_dir(plan: P.LabPlan, node: P.Node) -> Path:
    return Path(plan.paths["hosts"]) / node.name


def mounted_under(prefix: str) -> list[str]:
    """Mount points at or below `prefix`, deepest first."""
    prefix = prefix.rstrip("/") + "/"
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if (mp + "/").startswith(prefix):
                out.append(mp)
    return sorted(set(out), key=len, reverse=True)


def mount_overlay(plan: P.LabPlan, node: P.Node) -> Path:
    d = host_dir(plan, node)
    for sub in ("upper", "work", "root"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    root = d / "root"
    run(["mount", "-t", "overlay", "overlay", "-o",
         f"lowerdir=/,upperdir={d / 'upper'},workdir={d / 'work'}", str(root)])
    return root


def _write(root: Path, rel: str, content: str, mode: int = 0o644,
           owner: tuple[int, int] | None = None) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink() or p.exists():
        p.unlink()
    p.write_text(content)
    os.chmod(p, mode)
    if owner:
        os.chown(p, *owner)


def _ids(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        f = line.split(":")
        if f[0] == user:
            return int(f[2]), int(f[3])
    raise LabError(f"no user {user} in {root}/etc/passwd")


def _group_id(root: Path, group: str) -> int:
    for line in (root / "etc/group").read_text().splitlines():
        f = line.split(":")
        if f[0] == group:
            return int(f[2])
    raise LabError(f"no group {group} in {root}/etc/group")


def _make_traversable(root: Path, path: str) -> None:
    """Let services running as other users reach a bound path (e.g. a venv whose python
    lives under root's 0700 home): add o+x on its ancestors, inside the container only."""
    parts = Path(path).parts[1:-1]
    for i in range(1, len(parts) + 1):
        d = root.joinpath(*parts[:i])
        if d.is_dir() and not d.is_symlink():
            mode = d.stat().st_mode & 0o7777
            if not mode & 0o001:
                os.chmod(d, mode | 0o001)


def prepare_root(plan: P.LabPlan, node: P.Node, root: Path, lab_pubkey: str) -> str:
    """Make the overlay look like a fresh cloud image for `node`; returns its host public key."""
    (root / "etc/machine-id").unlink(missing_ok=True)
    _write(root, "etc/hostname", node.name + "\n")
    _write(root, "etc/hosts", P.etc_hosts(plan, node))
    _write(root, "etc/resolv.conf", P.resolv_conf(plan, node))
    _write(root, "etc/fstab", "# lab container: nothing to mount\n")
    units = root / "etc/systemd/system"
    for unit in P.masked_units(node, P.unmasked_units(plan, node)):
        link = units / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/dev/null")
    for rel, content in P.unit_dropins(node).items():
        _write(units, rel, content)
    _write(root, "etc/systemd/logind.conf.d/50-provision-lab.conf", P.logind_conf())
    # sshd: one fresh ed25519 host key, key-only logins
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    keyfile = root / "etc/ssh/ssh_host_ed25519_key"
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{node.name}", "-f", str(keyfile)])
    if P.cloud_image(plan, node):
        prepare_cloud(plan, node, root)
    else:
        _write(root, "etc/ssh/sshd_config.d/00-provision-lab.conf", P.sshd_config())
    _write(root, "root/.ssh/authorized_keys", lab_pubkey + "\n", 0o600)
    os.chmod(root / "root/.ssh", 0o700)
    try:
        _ids(root, "admin")
    except LabError:
        run(["useradd", "--root", str(root), "-m", "-s", "/bin/bash", "-p", "*", "admin"])
    uid, gid = _ids(root, "admin")
    ssh_dir = root / "home/admin/.ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    os.chown(ssh_dir, uid, gid)
    os.chmod(ssh_dir, 0o700)
    _write(root, "home/admin/.ssh/authorized_keys", lab_pubkey + "\n", 0o600, (uid, gid))
    _write(root, "etc/sudoers.d/90-provision-lab-admin", P.sudoers("admin"), 0o440)
    for path in (plan.venv, *([plan.repo] if plan.repo else []), *plan.extra_binds):
        _make_traversable(root, path)
    if node.kind == "ns1":
        bind_gid = _group_id(root, "bind")
        bind_uid = _ids(root, "bind")[0]
        _write(root, "etc/bind/named.conf", P.named_conf(plan))
        _write(root, "etc/bind/lab-tsig.key", Path(plan.paths["tsig_key"]).read_text(), 0o640, (0, bind_gid))
        for old in (root / "var/lib/bind").glob(f"db.{P.ZONE}*"):
            old.unlink()
        _write(root, f"var/lib/bind/db.{P.ZONE}", P.zone_file(plan), 0o644, (bind_uid, bind_gid))
        _pebble(plan, root)
    if node.kind == "resolver":
        _write(root, "etc/unbound/unbound.conf", P.unbound_conf(plan))
    return (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().strip()


def prepare_cloud(plan: P.LabPlan, node: P.Node, root: Path) -> None:
    """The cloud flavour (see `P.cloud_files`): cloud-init's sshd drop-ins, no package lists
    or apt sources, the dpkg lock held at boot, socket-activated sshd on one host."""
    for rel, content in P.cloud_files(plan, node).items():
        _write(root, rel, content)
    for rel, target in P.cloud_links(plan, node).items():
        link = root / rel
        if link.is_symlink() or link.exists():
            link.unlink()
        if target is not None:
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    for rel in P.CLOUD_EMPTIED_DIRS:
        d = root / rel
        for entry in d.iterdir() if d.is_dir() else ():
            if entry.name == "partial" and entry.is_dir():
                for f in entry.iterdir():
                    f.unlink()
            elif entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    for rel in P.CLOUD_REMOVED_FILES:
        (root / rel).unlink(missing_ok=True)


def remove_host_dirs(plan: P.LabPlan) -> None:
    """Delete overlay upper/work dirs — never while anything is mounted below them."""
    hosts = Path(plan.paths["hosts"])
    if not hosts.exists():
        return
    still = mounted_under(str(hosts))
    if still:
        raise LabError(f"refusing to delete {hosts}: still mounted: {', '.join(still)}")
    for d in hosts.iterdir():
        for sub in ("upper", "work"):
            if (d / sub).exists():
                shutil.rmtree(d / sub)
        for rest in d.iterdir():
            if rest.is_dir() and not rest.is_symlink():
                rest.rmdir()  # the (unmounted, empty) mount point; fails loudly otherwise
            else:
                rest.unlink()
        d.rmdir()
    hosts.rmdir()


# --- containers -------------------------------------------------------------------

def cgroup_roots() -> list[Path]:
    """Where this process sits in the hierarchies systemd tracks units with: the named
    `systemd` v1 hierarchy and the unified (v2) one, when mounted and not namespaced."""
    mine: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        mine[controllers] = path
    roots = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, rest = pre.split(), post.split()
        if len(fields) < 5 or len(rest) < 3 or fields[3] != "/":
            continue
        key = ("" if rest[0] == "cgroup2" else
               "name=systemd" if rest[0] == "cgroup" and "name=systemd" in rest[2].split(",")
               else None)
        if key is None or key not in mine:
            continue
        roots.append(Path(fields[4]) / mine[key].lstrip("/"))
    return roots


def container_cgroups(plan: P.LabPlan, node: P.Node) -> list[str]:
    """Create the container's own cgroup in each hierarchy we may write to (see P.cgroup_of)."""
    made = []
    for root in cgroup_roots():
        d = root / P.cgroup_of(plan, node)
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue  # not ours to write: the containers share one subtree, as before
        made.append(str(d))
    return made


def remove_cgroups(plan: P.LabPlan) -> None:
    """Remove the lab's (now empty) cgroups, deepest first; leave anything still in use."""
    for root in cgroup_roots():
        top = root / P.CGROUP_PARENT / plan.name
        if not top.is_dir():
            continue
        for d, _, _ in os.walk(top, topdown=False):
            with suppress(OSError):
                os.rmdir(d)
        with suppress(OSError):
            os.rmdir(root / P.CGROUP_PARENT)  # only when no other lab uses it


def start_container(plan: P.LabPlan, node: P.Node, root: Path) -> int:
    logf = open(host_dir(plan, node) / "console.log", "wb")  # noqa: SIM115 - handed to the child
    command = P.in_cgroups(P.nspawn_command(plan, node, str(root)), container_cgroups(plan, node))
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, env={**os.environ, **P.NSPAWN_ENV},
                            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    logf.close()
    return proc.pid


def _banner(address: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0) as s:
            s.settimeout(2.0)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def _dns_ok(address: str, qname: str, rtype: str = "A") -> bool:
    """`address` answers `qname`/`rtype` with a record (NOERROR, a non-empty answer)."""
    try:
        r = dns.query.udp(dns.message.make_query(qname, rtype), address, timeout=0.5)
    except Exception:
        return False
    return r.rcode() == dns.rcode.NOERROR and bool(r.answer)


def console_tail(plan: P.LabPlan, node: P.Node, lines: int = 15) -> str:
    try:
        text = (host_dir(plan, node) / "console.log").read_text(errors="replace")
    except OSError:
        return "  (no console log)"
    return "\n".join("  " + line for line in text.splitlines()[-lines:])


class _Check:
    """One readiness condition, with what it last saw (for the error when it never holds)."""

    def __init__(self, name: str, probe: Callable[[], tuple[bool, str]]):
        self.name = name
        self.probe = probe
        self.seen = "not tried"

    def __call__(self) -> bool:
        try:
            ok, self.seen = self.probe()
        except subprocess.TimeoutExpired as e:  # a host still booting; asked again until the deadline
            ok, self.seen = False, f"{e.cmd[0]} did not answer within {e.timeout:.0f} s"
        return ok


def _booted(pid: int) -> tuple[bool, str]:
    """Boot has finished: no /run/nologin (pam_nologin refuses non-root logins until
    systemd-user-sessions removes it) and the system manager is running or degraded."""
    leader = container_leader(pid)
    if leader is None:
        return False, "no container leader yet"
    r = subprocess.run(["nsenter", "-t", str(leader), "-a", "--", "sh", "-c",
                        "if test -e /run/nologin; then echo nologin; fi; systemctl is-system-running"],
                       capture_output=True, text=True, timeout=10, check=False)
    said = " ".join(r.stdout.split())
    return said in ("running", "degraded"), f"is-system-running: {said or r.stderr.strip()}"


def _login(plan: P.LabPlan, node: P.Node, user: str = "admin") -> tuple[bool, str]:
    """A real key login as the lab's login user, host key verified: what `apply` will do."""
    r = subprocess.run(["ssh", "-F", "/dev/null", "-o", "BatchMode=yes",
                        "-o", "StrictHostKeyChecking=yes",
                        "-o", f"UserKnownHostsFile={plan.paths['known_hosts']}",
                        "-o", "ConnectTimeout=3", "-i", plan.paths["identity"],
                        f"{user}@{node.primary.ipv4}", "true"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
                       check=False)
    return r.returncode == 0, f"ssh {user}@: exit {r.returncode} {r.stderr.strip()[-200:]}"


def _pebble(plan: P.LabPlan, root: Path) -> None:
    """ns1's Pebble: a listener certificate made for its address (its root is the
    operator's acme.ca_bundle), its config, and its unit enabled."""
    ca, cert, key = pebble.listener_certificate([plan.address("ns1")])
    Path(plan.paths["pebble_bundle"]).write_bytes(ca)
    _write(root, f"{P.PEBBLE_DIR}/cert.pem", cert.decode())
    _write(root, f"{P.PEBBLE_DIR}/key.pem", key.decode(), 0o600)
    for rel, content in P.pebble_files(plan).items():
        _write(root, rel, content)
    wants = root / "etc/systemd/system/multi-user.target.wants" / P.PEBBLE_UNIT
    wants.parent.mkdir(parents=True, exist_ok=True)
    if wants.is_symlink() or wants.exists():
        wants.unlink()
    wants.symlink_to(f"/etc/systemd/system/{P.PEBBLE_UNIT}")


def _listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_ready(plan: P.LabPlan, node: P.Node, pid: int, deadline: float,
               timeout: float = BOOT_TIMEOUT) -> float:
    """Poll until the host is really ready: sshd answers, boot has finished, a login as the
    login user succeeds (and DNS answers, on ns1/resolver). Returns seconds waited."""
    start = time.monotonic()
    addr = node.primary.ipv4
    checks = [_Check("sshd banner", lambda: (_banner(addr), "")),
              _Check("boot finished", lambda: _booted(pid)),
              _Check("login", lambda: _login(plan, node))]
    if node.kind in ("ns1", "resolver"):
        checks.append(_Check("DNS answers", lambda: (_dns_ok(addr, f"ns1.{P.ZONE}"), "")))
    if node.kind == "ns1":
        checks.append(_Check("Pebble listens", lambda: (_listening(addr, pebble.ACME_PORT), "")))
    with in_netns(node.netns):
        pending = list(checks)
        while pending:
            if not pid_alive(pid):
                raise LabError(f"{node.name}: systemd-nspawn exited; its console said:\n"
                               + console_tail(plan, node))
            if time.monotonic() > deadline:
                waiting = pending[0]
                raise LabError(f"{node.name}: not ready after {timeout:.0f} s, waiting for "
                               f"{waiting.name} ({waiting.seen}); its console said:\n"
                               + console_tail(plan, node))
            while pending and pending[0]():  # in order: a login is tried once sshd answers
                pending.pop(0)
            if pending:
                time.sleep(0.1)
    return time.monotonic() - start


def memory_kib(node: P.Node) -> int | None:
    """PSS of every process inside the node's network namespace, in KiB."""
    ino = netns_inode(node.netns)
    if ino is None:
        return None
    total = 0
    for pid in pids_in_netns({ino}):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


# --- tear-down --------------------------------------------------------------------

def _lab_netns(plan: P.LabPlan) -> list[str]:
    pat = re.compile(rf"^plab-{re.escape(plan.name)}-(sw|op|mirror|bastion|ns1|resolver|gpu\d+)$")
    return [ns for ns in netns_list() if pat.match(ns)]


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def teardown(plan: P.LabPlan, pids: dict[str, int]) -> None:
    """Stop containers, unmount, delete namespaces and state. Safe on a half-built lab."""
    nspawns = [pid for host, pid in pids.items()
               if host in {n.name for n in plan.containers} and is_nspawn(pid, plan.node(host).machine)]
    for pid in nspawns:
        os.kill(pid, signal.SIGTERM)
    alive = _wait_gone(nspawns, STOP_GRACE)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    _wait_gone(alive, 2.0)
    namespaces = _lab_netns(plan)
    inodes = {ino for ns in namespaces if (ino := netns_inode(ns)) is not None}
    stray = pids_in_netns(inodes)  # anything still running inside the lab (ip netns exec …)
    for pid in stray:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(list(stray), 2.0)
    # what systemd-nspawn leaves in /run when it is killed rather than stopped
    for node in plan.containers:
        root = host_dir(plan, node) / "root"
        if os.path.ismount(root):
            st = os.stat(root)
            Path(f"{NSPAWN_RUN}/locks/inode-{st.st_dev}:{st.st_ino}").unlink(missing_ok=True)
        propagate = Path(f"{NSPAWN_RUN}/propagate/{node.machine}")
        if propagate.is_dir() and not os.path.ismount(propagate):
            shutil.rmtree(propagate, ignore_errors=True)
    for mp in mounted_under(plan.paths["hosts"]):
        if run(["umount", mp], check=False).returncode != 0:
            run(["umount", "-l", mp], check=False)
    for ns in namespaces:
        run(["ip", "netns", "del", ns], check=False)
    shutil.rmtree(Path("/etc/netns") / plan.operator.netns, ignore_errors=True)
    remove_host_dirs(plan)
    remove_cgroups(plan)
    shutil.rmtree(plan.state_dir, ignore_errors=True)
    Path(lock_path(plan.name)).unlink(missing_ok=True)  # we hold it; a waiter re-reads the state


# --- up ---------------------------------------------------------------------------

def write_operator_files(plan: P.LabPlan, host_keys: dict[str, str], team_keys: dict[str, str]) -> None:
    paths = plan.paths
    Path(paths["known_hosts"]).write_text(P.known_hosts(plan, host_keys))
    jupyter = importlib.util.find_spec("jupyter_server") is not None
    api_keys = {p: ensure_api_key(f"{paths['api_keys']}/{p}") for p in ("alice", "bob")}
    doc = P.inventory_doc(plan, team_keys, jupyter=jupyter, api_keys=api_keys)
    Path(paths["inventory"]).write_text(
        f"# lab {plan.name}: written by `provision lab up`\n" + yaml.safe_dump(doc, sort_keys=False))
    Path(paths["ssh_config"]).write_text(render_ssh_config(load_inventory(paths["inventory"])))


def up(plan: P.LabPlan) -> dict[str, float]:
    """Build and boot the lab; returns timings. Tears down what it built on failure."""
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    pids: dict[str, int] = {}
    Path(plan.dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(plan.dir, 0o700)
    write_state(plan, pids, "starting")
    try:
        lab_pub = ensure_keypair(plan.paths["identity"], f"provision-lab-{plan.name}")
        team = {p: ensure_keypair(f"{plan.paths['team']}/{p}", f"{p}@provision-lab-{plan.name}")
                for p in ("alice", "bob")}
        ensure_tsig(plan.paths["tsig_key"])
        ensure_host_limits()
        if Path(plan.paths["hosts"]).exists():
            remove_host_dirs(plan)  # leftovers of an earlier run: start from a fresh image
        build_network(plan)
        timings["network"] = time.monotonic() - t0

        def prepare(node: P.Node) -> str:
            return prepare_root(plan, node, mount_overlay(plan, node), lab_pub)

        host_keys = parallel({n.name: partial(prepare, n) for n in plan.containers})
        timings["roots"] = time.monotonic() - t0
        for node in plan.containers:
            pids[node.name] = start_container(plan, node, host_dir(plan, node) / "root")
        write_state(plan, pids, "booting")
        write_operator_files(plan, host_keys, team)
        timeout = P.boot_timeout(len(plan.containers), BOOT_TIMEOUT)
        deadline = time.monotonic() + timeout
        waited = parallel({n.name: partial(wait_ready, plan, n, pids[n.name], deadline, timeout)
                           for n in plan.containers})
        timings.update({f"ready:{k}": v for k, v in waited.items()})
        write_state(plan, pids, "up")
    except BaseException:
        log("lab up failed; tearing down what was built")
        teardown(plan, pids)
        raise
    timings["total"] = time.monotonic() - t0
    return timings


def status(plan: P.LabPlan, pids: dict[str, int], *, probe: bool = True) -> list[dict[str, Any]]:
    rows = []
    for node in plan.nodes:
        row: dict[str, Any] = {
            "host": node.name, "kind": node.kind, "netns": node.netns,
            "addresses": {i.segment: [i.ipv4, i.ipv6] for i in node.ifaces},
        }
        if node.is_container:
            pid = pids.get(node.name)
            running = bool(pid) and is_nspawn(pid, node.machine) and pid_alive(pid)  # type: ignore[arg-type]
            # the container's init (its PID 1, as the machine sees it): what `nsenter -t`
            # and `provision lab shell` enter; nspawn's own pid is not inside the container
            row.update(machine=node.machine, pid=pid, running=running,
                       leader=container_leader(pid) if running and pid else None)
            ssh = False
            if running and probe and netns_inode(node.netns) is not None:
                with in_netns(node.netns):
                    ssh = _banner(node.primary.ipv4)
            row["ssh"] = ssh
            row["up"] = running and ssh
            row["memory_kib"] = memory_kib(node) if running else None
        else:
            row["up"] = netns_inode(node.netns) is not None
        rows.append(row)
    return rows

