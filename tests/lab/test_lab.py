"""The lab itself: real sshd through a bastion, isolation, BIND with TSIG, Unbound caching."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.lab import plan as P

from .conftest import Lab, provision

pytestmark = pytest.mark.lab


def _connect(address: str, port: int = 22, timeout: float = 2.0) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect((address, port))
            return True
    except OSError:
        return False


# --- inventory and ssh -------------------------------------------------------------

def test_inventory_is_valid_and_describes_the_lab(lab: Lab) -> None:
    inv = load_inventory(lab.inventory)
    assert [b.name for b in inv.bastions] == ["bastion"]
    gpus = [h for h in inv.hosts if h.name.startswith("gpu")]
    assert len(gpus) == lab.plan.gpus
    assert all(h.jump_chain == ("bastion",) for h in gpus)
    assert inv.node("bastion").ssh_from == (lab.plan.subnet4("pub"), lab.plan.subnet6("pub"))
    assert inv.node("bastion").egress == (f"{lab.addr('bastion', 'prv')}/32",
                                          f"{lab.addr('bastion', 'prv', v6=True)}/128")
    assert {p.name: p.sudo for p in inv.team} == {"alice": True, "bob": False}
    for person in inv.team:
        assert person.identity_file and Path(person.identity_file).exists()
        assert Path(person.identity_file + ".pub").read_text().split()[:2] == person.keys[0].split()[:2]
    assert inv.dns and inv.dns.resolvers == (lab.addr("resolver"),)
    assert {s.name for s in gpus[0].services} == {"jupyter", "tensorboard", "model-api"}
    assert {s.name for s in gpus[1].services} == {"jupyter", "tensorboard"}
    api = gpus[0].service("model-api")  # the public model API behind the door: lab's CA, keys
    assert api is not None and api.https is not None and api.https.name == P.DOOR_NAME
    assert {k.client for k in api.https.keys} == {"alice", "bob"}
    assert inv.acme is not None and inv.cluster(P.CLUSTER) is not None
    assert inv.cluster(P.CLUSTER).members == tuple(h.name for h in gpus)  # type: ignore[union-attr]


def test_ssh_through_the_bastion_reaches_gpu1(lab: Lab) -> None:
    r = lab.ssh("gpu1", "hostname")
    assert r.stdout.strip() == "gpu1"


def test_admin_has_passwordless_sudo_and_root_logs_in_by_key_only(lab: Lab) -> None:
    assert lab.ssh("gpu1", "sudo", "-n", "id", "-u").stdout.strip() == "0"
    sshd = lab.host("gpu2", "sshd", "-T").stdout
    assert "permitrootlogin without-password" in sshd
    assert "passwordauthentication no" in sshd
    keys = lab.host("gpu2", "ls", "/etc/ssh").stdout.split()
    assert [k for k in keys if k.startswith("ssh_host_")] == [
        "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"]


def test_the_project_venv_runs_inside_gpu_hosts_as_admin(lab: Lab) -> None:
    python = f"{lab.plan.venv}/bin/python"
    r = lab.ssh("gpu1", python, "-c", "import sys, provision; print(sys.prefix)")
    assert r.stdout.strip() == lab.plan.venv


def test_a_wrong_known_hosts_makes_ssh_fail(lab: Lab, tmp_path: Path) -> None:
    lines = lab.known_hosts.read_text().splitlines()
    bastion_line = next(line for line in lines if line.startswith("bastion,"))
    gpu1_line = next(line for line in lines if line.startswith("gpu1,"))
    other_key = " ".join(next(line for line in lines if line.startswith("gpu2,")).split()[1:])
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{bastion_line}\n{gpu1_line.split()[0]} {other_key}\n")
    r = lab.ssh("gpu1", "hostname", known_hosts=wrong, check=False)
    assert r.returncode == 255
    assert "verification failed" in r.stderr or "HOST IDENTIFICATION HAS CHANGED" in r.stderr
    empty = tmp_path / "empty"
    empty.write_text("")
    r = lab.ssh("gpu1", "hostname", known_hosts=empty, check=False)
    assert r.returncode == 255 and "gpu1" not in r.stdout


# --- topology ----------------------------------------------------------------------

def test_gpu_hosts_are_not_reachable_from_the_operator(lab: Lab) -> None:
    with lab.operator_netns():
        assert _connect(lab.addr("bastion"))  # the bastion is (control)
        assert _connect(lab.addr("bastion", v6=True))
        assert not _connect(lab.addr("gpu1"))
        assert not _connect(lab.addr("gpu1", v6=True))
        assert not _connect(lab.addr("bastion", "prv"))
    routes = lab.op("ip", "route", "show").stdout + lab.op("ip", "-6", "route", "show").stdout
    assert "default" not in routes


def test_the_bastion_does_not_route_between_segments(lab: Lab) -> None:
    prv4 = lab.plan.subnet4("prv")
    lab.op("ip", "route", "add", prv4, "via", lab.addr("bastion"))
    try:
        with lab.operator_netns():
            assert _connect(lab.addr("bastion"))
            assert not _connect(lab.addr("gpu1"))
    finally:
        lab.op("ip", "route", "del", prv4, "via", lab.addr("bastion"))
    assert lab.host("bastion", "cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip() == "0"


def test_iptables_in_one_container_affects_no_other_nor_the_machine(lab: Lab) -> None:
    marker = f"lab-test-{secrets.token_hex(3)}"
    rule = ["INPUT", "-p", "tcp", "--dport", "22", "-m", "comment", "--comment", marker, "-j", "REJECT"]
    for tool in ("iptables", "ip6tables"):
        lab.host("ns1", tool, "-I", *rule)
    try:
        for tool in ("iptables", "ip6tables"):
            assert marker in lab.host("ns1", tool, "-S").stdout
            assert marker not in lab.host("resolver", tool, "-S").stdout
            assert marker not in lab.host("gpu1", tool, "-S").stdout
            assert marker not in subprocess.run([tool, "-S"], capture_output=True, text=True,
                                                check=True).stdout
        with lab.operator_netns():
            assert not _connect(lab.addr("ns1"))
            assert not _connect(lab.addr("ns1", v6=True))
            assert _connect(lab.addr("resolver"))
            assert _connect(lab.addr("resolver", v6=True))
    finally:
        for tool in ("iptables", "ip6tables"):
            lab.host("ns1", tool, "-D", *rule)
    with lab.operator_netns():
        assert _connect(lab.addr("ns1"))


# --- DNS ---------------------------------------------------------------------------

def _query(server: str, name: str, rdtype: str = "A", rd: bool = True) -> tuple[list[str], int]:
    import dns.flags
    import dns.message
    import dns.query

    q = dns.message.make_query(name, rdtype)
    if not rd:
        q.flags &= ~dns.flags.RD
    r = dns.query.udp(q, server, timeout=2)
    values = sorted(rr.to_text() for rrset in r.answer for rr in rrset)
    ttl = min((rrset.ttl for rrset in r.answer), default=-1)
    return values, ttl


def _update(lab: Lab, name: str, address: str, ttl: int, signed: bool = True) -> int:
    """Replace the A record `name` (relative to the zone) on ns1; returns the rcode."""
    import dns.query
    import dns.update

    upd = dns.update.Update(P.ZONE, keyring=lab.tsig_keyring() if signed else None)
    upd.replace(name, ttl, "A", address)
    r = dns.query.tcp(upd, lab.addr("ns1"), timeout=5)
    return r.rcode()


def test_rfc2136_updates_need_the_tsig_key(lab: Lab) -> None:
    import dns.rcode

    name = f"upd-{secrets.token_hex(3)}"
    ip = f"10.{lab.plan.octet}.1.77"
    with lab.operator_netns():
        assert _update(lab, name, ip, 60, signed=False) == dns.rcode.REFUSED
        assert _query(lab.addr("ns1"), f"{name}.{P.ZONE}", rd=False)[0] == []
        assert _update(lab, name, ip, 60, signed=True) == dns.rcode.NOERROR
        assert _query(lab.addr("ns1"), f"{name}.{P.ZONE}", rd=False)[0] == [ip]


def test_the_resolver_answers_the_zone_and_nothing_else(lab: Lab) -> None:
    import dns.message
    import dns.query
    import dns.rcode

    with lab.operator_netns():
        assert _query(lab.addr("resolver"), f"gpu1.{P.ZONE}")[0] == [lab.addr("gpu1")]
        assert _query(lab.addr("resolver", v6=True), f"gpu1.{P.ZONE}", "AAAA")[0] == [
            lab.addr("gpu1", v6=True)]
        r = dns.query.udp(dns.message.make_query("example.com", "A"), lab.addr("resolver"), timeout=2)
        assert r.rcode() == dns.rcode.REFUSED
    # the gpu hosts have a resolver too (its leg on the private segment)
    out = lab.host("gpu1", "getent", "ahostsv4", f"ns1.{P.ZONE}").stdout
    assert lab.addr("ns1") in out


def test_the_resolver_caches_until_the_ttl_runs_out(lab: Lab) -> None:
    """The resolver serves the value it cached, counting its TTL down, and the new one only
    once that TTL has run out. Asserted from when each answer came, never from how quickly
    the test got to ask: a busy machine only makes the first new answer come later (where
    "the next query still gets the old value" raced the TTL)."""
    ttl = 6
    label = f"cache-{secrets.token_hex(3)}"
    name = f"{label}.{P.ZONE}"
    old, new = f"10.{lab.plan.octet}.1.201", f"10.{lab.plan.octet}.1.202"
    resolver, ns1 = lab.addr("resolver"), lab.addr("ns1")
    with lab.operator_netns():
        assert _update(lab, label, old, ttl) == 0
        primed = time.monotonic()  # the resolver cached `old` no earlier than this
        assert _query(resolver, name)[0] == [old]
        assert _update(lab, label, new, ttl) == 0
        assert _query(ns1, name, rd=False)[0] == [new]
        seen: list[tuple[float, list[str], int]] = []
        deadline = time.monotonic() + ttl + 30
        while not seen or seen[-1][1] != [new]:
            assert time.monotonic() < deadline, seen
            values, remaining = _query(resolver, name)
            seen.append((time.monotonic(), values, remaining))
            time.sleep(0.25)
    first_new = seen[-1][0]
    # until then, the cached value, its TTL counting down from at most `ttl`
    assert all(v == [old] and 0 <= r <= ttl for _, v, r in seen[:-1]), seen
    rs = [r for _, _, r in seen[:-1]]
    assert rs == sorted(rs, reverse=True), seen
    # and the new value not before the cached one's TTL ran out (-1 s: whole seconds)
    assert first_new - primed >= ttl - 1, (first_new - primed, seen)


# --- the CLI -----------------------------------------------------------------------

def test_lab_exec_runs_in_the_operator_namespace_with_its_exit_code(lab: Lab) -> None:
    r = provision("exec", "--", "sh", "-c", "ip -o addr show; exit 7", name=lab.name, check=False)
    assert r.returncode == 7
    assert lab.addr("operator") in r.stdout


def _systemd_cgroup(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if ":name=systemd:" in line or line.startswith("0::"):
            return line.split(":", 2)[2]
    raise AssertionError(f"no systemd cgroup for {pid}")


def test_each_container_has_its_own_cgroup_and_oneshot_units_start_side_by_side(lab: Lab) -> None:
    """Containers that share a cgroup subtree remove each other's unit cgroups: a oneshot
    unit started in two hosts at once then failed with 219/CGROUP ("Failed to attach to
    cgroup ... No such file or directory"), which is how provision-firewall.service failed
    in a 32-host cold bootstrap."""
    hosts = ("bastion", "gpu1", "gpu2")
    paths = {h: _systemd_cgroup(lab.leader(h)) for h in hosts}
    assert len(set(paths.values())) == len(hosts), paths
    unit = "provision-cgroup-probe.service"
    script = ("systemd-run --quiet --unit=provision-cgroup-probe -p Type=oneshot "
              "-p RemainAfterExit=no /bin/true; fails=0; for i in 1 2 3 4 5 6 7 8; do "
              f"systemctl reset-failed {unit} 2>/dev/null; systemctl restart {unit} || "
              f"{{ fails=$((fails+1)); systemctl show -p Result,ExecMainStatus {unit}; }}; "
              "done; echo fails=$fails")
    procs = [subprocess.Popen(["nsenter", "-t", str(lab.leader(h)), "-a", "--", "sh", "-c", script],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for h in hosts]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for h in hosts:
        lab.host(h, "systemctl", "reset-failed", check=False)
    assert all("ExecMainStatus=219" not in o for o in outs), outs


def test_lab_status_json(lab: Lab) -> None:
    data = json.loads(provision("status", "--json", name=lab.name).stdout)
    assert data["up"] is True
    hosts = {h["host"]: h for h in data["hosts"]}
    assert {"operator", "bastion", "gpu1", "ns1", "resolver"} <= set(hosts)
    assert hosts["gpu1"]["addresses"]["prv"] == [lab.addr("gpu1"), lab.addr("gpu1", v6=True)]
    assert hosts["gpu1"]["memory_kib"] > 0


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_second_lab_comes_up_twice_harmlessly_and_down_leaves_nothing(lab: Lab) -> None:
    name = f"{lab.name}-b"[:24]
    data_dir = Path(P.DATA_ROOT) / name
    links_before = _root_links()
    try:
        provision("up", "--gpus", "1", name=name)
        status = json.loads(provision("status", "--json", name=name).stdout)
        assert status["up"] is True and [h["host"] for h in status["hosts"]] == [
            "operator", "bastion", "gpu1", "ns1", "resolver"]
        # a different lab: different subnets and namespaces than the session lab
        other = P.plan_from_state(json.loads(Path(f"{P.STATE_ROOT}/{name}/state.json").read_text()))
        assert {n.netns for n in other.nodes}.isdisjoint({n.netns for n in lab.plan.nodes})
        again = provision("up", "--gpus", "1", name=name)
        assert "already up" in again.stdout
        assert json.loads(provision("status", "--json", name=name).stdout)["up"] is True
    finally:
        provision("down", name=name)
        keys_only = [p.name for p in data_dir.iterdir()] if data_dir.exists() else []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not re.search(rf"^plab-{re.escape(name)}-", netns, re.M)
    assert str(data_dir) not in Path("/proc/self/mountinfo").read_text()
    assert _processes_mentioning(f"--machine={name}-") == []
    assert _root_links() - links_before == set()
    assert not Path(f"{P.STATE_ROOT}/{name}").exists()
    assert not Path(f"/etc/netns/plab-{name}-op").exists()
    assert not (data_dir / "hosts").exists()
    propagate = Path("/run/systemd/nspawn/propagate")
    if propagate.exists():
        assert [d for d in os.listdir(propagate) if d.startswith(f"{name}-")] == []
    assert "hosts" not in keys_only
    from provision.lab.shell import cgroup_roots

    assert [r for r in cgroup_roots() if (r / P.CGROUP_PARENT / name).exists()] == []
    # the session lab is untouched
    assert lab.ssh("gpu1", "hostname").stdout.strip() == "gpu1"


def test_lab_up_is_ready_for_logins_at_once_even_under_load(lab: Lab) -> None:
    """Ready means logins work (no pam_nologin 'System is booting up'), not a banner:
    right after `lab up` returns, the login user gets in on every host, twice, with both
    cores busy."""
    name = f"{lab.name}-c"[:24]
    burn = "import time\nt = time.time() + 90\nwhile time.time() < t: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(2)]
    try:
        for _round in range(2):
            provision("up", "--gpus", "1", name=name)
            try:
                other = P.plan_from_state(
                    json.loads(Path(f"{P.STATE_ROOT}/{name}/state.json").read_text()))
                for host in ("bastion", "gpu1"):
                    r = subprocess.run(
                        ["ip", "netns", "exec", other.operator.netns, "ssh", "-F",
                         other.paths["ssh_config"], "-o", "BatchMode=yes", host, "id", "-un"],
                        capture_output=True, text=True, timeout=60)
                    assert r.returncode == 0 and r.stdout.strip() == "admin", (host, r.stderr)
            finally:
                provision("down", name=name)
    finally:
        for b in burners:
            b.kill()
            b.wait()
        shutil.rmtree(Path(P.DATA_ROOT) / name, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _remove_second_lab_dirs(lab: Lab) -> Iterator[None]:
    yield
    shutil.rmtree(Path(P.DATA_ROOT) / f"{lab.name}-b"[:24], ignore_errors=True)

