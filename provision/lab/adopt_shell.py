"""`provision lab adopt`'s I/O: the people's lab keys, the TSIG key's copy, the adopted
zones in the lab's BIND and Unbound, the copy itself. Decides nothing (`adopt.py` does)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from . import plan as P
from .netns import in_netns
from .shell import LabError, _dns_ok, _write, ensure_keypair, host_dir
from .state import container_leader, read_state

ADOPTED = "adopted.json"  # in the lab's state directory: zones added, hosts mapped


def people_keys(out: Path, people: list[str], lab: str) -> dict[str, tuple[str, str]]:
    """A lab key pair per person, in OUT/team (made once): (private key path, public key)."""
    return {p: (str(out / "team" / p), ensure_keypair(str(out / "team" / p), f"{p}@provision-lab-{lab}"))
            for p in people}


def copy_tsig(plan: P.LabPlan, out: Path) -> str:
    """The lab's TSIG key copied into the adopt directory (0600): a zone's key file must lie
    in its inventory's tree (docs/trust-model.md#a-providers-secret-comes-from-where-you-put-it)."""
    dest = out / "tsig.key"
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(Path(plan.paths["tsig_key"]).read_text())
    os.chmod(dest, 0o600)
    return str(dest)


def adopted(plan: P.LabPlan) -> dict[str, object]:
    try:
        data: dict[str, object] = json.loads((Path(plan.state_dir) / ADOPTED).read_text())
        return data
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def adopted_hosts(plan: P.LabPlan) -> dict[str, str]:
    """The adopted inventories' host names -> the lab's hosts."""
    hosts = adopted(plan).get("hosts")
    return {str(k): str(v) for k, v in hosts.items()} if isinstance(hosts, dict) else {}


def record_adoption(plan: P.LabPlan, zones: tuple[str, ...], hosts: dict[str, str]) -> None:
    doc = {"zones": list(zones), "hosts": {**adopted_hosts(plan), **hosts}}
    (Path(plan.state_dir) / ADOPTED).write_text(json.dumps(doc, indent=2))


def _in_container(plan: P.LabPlan, host: str, *cmd: str) -> None:
    state = read_state(plan.name) or {}
    leader = container_leader(int(state.get("pids", {}).get(host, 0)))
    if leader is None:
        raise LabError(f"{host}: the container is not running")
    r = subprocess.run(["nsenter", "-t", str(leader), "-a", "--", *cmd],
                       capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0:
        raise LabError(f"{host}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-500:]}")


def serve_zones(plan: P.LabPlan, zones: tuple[str, ...]) -> tuple[str, ...]:
    """Make ns1 authoritative for `zones` too (besides those adopted before; a zone's file is
    written once, so `dns apply`'s records stay) and the resolver ask it for them; returns
    every adopted zone. Restarts named and unbound, then waits until both answer."""
    prev = adopted(plan).get("zones")
    every = tuple(dict.fromkeys([*(prev if isinstance(prev, list) else []), *zones]))
    if not zones:
        return every
    ns1 = host_dir(plan, plan.node("ns1")) / "root"
    bind_uid, bind_gid = os.stat(ns1 / "var/lib/bind").st_uid, os.stat(ns1 / "var/lib/bind").st_gid
    for z in every:
        if not (ns1 / P.zone_path(z).lstrip("/")).exists():
            _write(ns1, P.zone_path(z), P.adopted_zone_file(z), 0o644, (bind_uid, bind_gid))
    _write(ns1, "etc/bind/named.conf", P.named_conf(plan, every))
    _write(host_dir(plan, plan.node("resolver")) / "root", "etc/unbound/unbound.conf",
           P.unbound_conf(plan, every))
    _in_container(plan, "ns1", "systemctl", "restart", "named.service")
    _in_container(plan, "resolver", "systemctl", "restart", "unbound.service")
    deadline = time.monotonic() + 30
    with in_netns(plan.operator.netns):
        for z in every:
            for server in (plan.address("ns1"), plan.address("resolver")):
                while not _dns_ok(server, f"ns1.{P.ZONE}") or not _dns_ok(server, z, "SOA"):
                    if time.monotonic() > deadline:
                        raise LabError(f"{server} does not answer for {z} after 30 s")
                    time.sleep(0.2)
    return every


def write_copy(dest: Path, text: str) -> None:
    """The copy, atomically (temp file beside it, rename); never through a symbolic link."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prepare_out(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    if out.is_symlink() or not out.is_dir():
        raise LabError(f"{out} is not a directory")
    shutil.chown(out, os.getuid(), os.getgid())
    os.chmod(out, 0o700)
