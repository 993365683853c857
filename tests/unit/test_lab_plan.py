"""The lab's pure decisions: names, addresses, rendered configs, the inventory it writes."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

import pytest
import yaml

from provision.inventory import load_inventory
from provision.lab import plan as P


def make(name: str = "labdev", gpus: int = 2, directory: str | None = None) -> P.LabPlan:
    return P.make_plan(name, gpus, directory, venv="/opt/venv", repo="/src/provision")


def fake_key(seed: int) -> str:
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes([seed]) * 32
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} k{seed}"


# --- names ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "Lab", "-x", "a_b", "a b", "x" * 25, "lab/1", "lab."])
def test_bad_lab_names_are_refused(bad: str) -> None:
    with pytest.raises(P.PlanError, match="invalid lab name"):
        P.check_name(bad)


def test_interface_names_fit_ifnamsiz_even_for_the_longest_lab() -> None:
    plan = make("a" * 24, P.MAX_GPUS)
    names = P.interface_names(plan)
    assert max(len(n) for n in names) <= P.IFNAMSIZ
    switch_side = [i.switch_name for n in plan.nodes for i in n.ifaces]
    assert len(set(switch_side)) == len(switch_side)


def test_everything_is_derived_from_the_name() -> None:
    a, b = make("alpha"), make("beta")
    assert make("alpha") == a  # stable
    assert (a.octet, a.ula) != (b.octet, b.ula)
    assert {n.netns for n in a.nodes}.isdisjoint({n.netns for n in b.nodes})
    assert {n.machine for n in a.containers}.isdisjoint({n.machine for n in b.containers})
    assert a.switch_netns != b.switch_netns
    assert a.state_dir == "/run/provision-lab/alpha"
    assert a.dir == "/var/lib/provision-lab/alpha"
    assert make("alpha", directory="/srv/x").dir == "/srv/x"


def test_a_name_that_extends_another_does_not_share_namespaces() -> None:
    a, b = make("a"), make("a-gpu1")
    assert {n.netns for n in a.nodes}.isdisjoint({n.netns for n in b.nodes})


def test_ula_is_rfc4193() -> None:
    net = ipaddress.ip_network(make().supernet6)
    assert net.prefixlen == 48 and net.subnet_of(ipaddress.ip_network("fd00::/8"))


def test_gpu_count_is_bounded() -> None:
    with pytest.raises(P.PlanError):
        make(gpus=0)
    with pytest.raises(P.PlanError):
        make(gpus=P.MAX_GPUS + 1)


# --- addressing --------------------------------------------------------------------

def test_topology_segments() -> None:
    plan = make(gpus=3)
    segs = {n.name: [i.segment for i in n.ifaces] for n in plan.nodes}
    assert segs == {
        "operator": ["pub", "dns"], "bastion": ["pub", "prv"],
        "gpu1": ["prv"], "gpu2": ["prv"], "gpu3": ["prv"],
        "ns1": ["dns"], "resolver": ["dns", "prv"],
    }
    # the operator shares no segment with the gpu hosts
    assert not {"prv"} & set(segs["operator"])


def test_addresses_are_unique_inside_their_segment_subnets() -> None:
    plan = make(gpus=P.MAX_GPUS)
    seen = set()
    for n in plan.nodes:
        for i in n.ifaces:
            assert ipaddress.ip_address(i.ipv4) in ipaddress.ip_network(plan.subnet4(i.segment))
            assert ipaddress.ip_address(i.ipv6) in ipaddress.ip_network(plan.subnet6(i.segment))
            assert P.is_lab_address(plan, i.ipv4) and P.is_lab_address(plan, i.ipv6)
            assert (i.ipv4 not in seen) and (i.ipv6 not in seen)
            seen |= {i.ipv4, i.ipv6}
    assert ipaddress.ip_network(plan.supernet4).is_private


def test_network_batches() -> None:
    plan = make()
    sw = P.switch_batch(plan)
    assert "link add br-prv type bridge mcast_snooping 0" in sw
    assert f"link add gpu1-prv type veth peer name eth0 netns {plan.node('gpu1').netns}" in sw
    assert "link set gpu1-prv master br-prv up" in sw
    gpu1 = P.node_batch(plan.node("gpu1"))
    assert f"addr add {plan.address('gpu1', v6=True)}/64 dev eth0 nodad" in gpu1
    assert not [line for line in gpu1 if "route" in line]  # connected routes only
    assert P.node_sysctls(plan.node("bastion"))["net/ipv4/ip_forward"] == "0"


# --- container contents ------------------------------------------------------------

def test_masks_keep_only_what_each_host_serves() -> None:
    plan = make()
    gpu, ns1, res = (P.masked_units(plan.node(h)) for h in ("gpu1", "ns1", "resolver"))
    for units in (gpu, ns1, res):
        assert "ssh.socket" in units and "postgresql.service" in units and "cron.service" in units
        assert "ssh.service" not in units
    assert "named.service" in gpu and "named.service" not in ns1 and "named.service" in res
    assert "unbound.service" in gpu and "unbound.service" in ns1 and "unbound.service" not in res


def test_named_conf_accepts_only_signed_updates() -> None:
    plan = make()
    conf = P.named_conf(plan)
    assert f'allow-update {{ key "{P.TSIG_KEY_NAME}"; }};' in conf
    assert "allow-update { any" not in conf
    assert "recursion no;" in conf
    assert plan.address("ns1") in conf and plan.address("ns1", v6=True) in conf


def test_zone_file_has_every_container() -> None:
    plan = make()
    zone = P.zone_file(plan, serial=7)
    assert "( 7 " in zone
    for n in plan.containers:
        assert f"{n.name}\t300\tIN\tA\t{n.primary.ipv4}" in zone
        assert f"{n.name}\t300\tIN\tAAAA\t{n.primary.ipv6}" in zone


def test_unbound_caches_and_asks_only_ns1() -> None:
    plan = make()
    conf = P.unbound_conf(plan)
    assert "cache-min-ttl: 0" in conf
    assert f"stub-addr: {plan.address('ns1')}" in conf
    assert "forward-zone" not in conf and "root-hints" not in conf
    assert 'local-zone: "." refuse' in conf
    assert f"access-control: {plan.supernet4} allow" in conf
    assert f"access-control: {plan.supernet6} allow" in conf
    for i in plan.node("resolver").ifaces:
        assert f"interface: {i.ipv4}" in conf and f"interface: {i.ipv6}" in conf


def test_each_node_gets_a_resolver_it_can_reach() -> None:
    plan = make()
    assert f"nameserver {plan.address('resolver', 'dns')}" in P.resolv_conf(plan, plan.operator)
    assert f"nameserver {plan.address('resolver', 'prv')}" in P.resolv_conf(plan, plan.node("gpu1"))
    assert f"nameserver {plan.address('resolver', 'prv')}" in P.resolv_conf(plan, plan.node("bastion"))


def test_sshd_is_key_only() -> None:
    conf = P.sshd_config()
    assert "PermitRootLogin prohibit-password" in conf
    assert "PasswordAuthentication no" in conf
    assert P.sudoers("admin").strip() == "admin ALL=(ALL) NOPASSWD:ALL"


def test_nspawn_boots_the_node_with_the_project_bound_read_only() -> None:
    plan = P.make_plan("labdev", 2, venv="/tmp/ci/.venv", repo="/tmp/ci", extra_binds=("/opt/py",))
    cmd = P.nspawn_command(plan, plan.node("gpu1"), "/var/lib/x/root")
    assert cmd[:4] == ["systemd-nspawn", "-q", "-D", "/var/lib/x/root"]
    for flag in ("--register=no", "--keep-unit", "--boot", "--capability=CAP_NET_ADMIN,CAP_NET_RAW",
                 f"--network-namespace-path=/run/netns/{plan.node('gpu1').netns}",
                 "--machine=labdev-gpu1", "--hostname=gpu1",
                 "--bind-ro=/tmp/ci/.venv", "--bind-ro=/tmp/ci", "--bind-ro=/opt/py"):
        assert flag in cmd
    same = P.make_plan("labdev", 2, venv="/v", repo="/v")
    assert P.nspawn_command(same, same.node("gpu1"), "/r").count("--bind-ro=/v") == 1


# --- operator side -----------------------------------------------------------------

def test_known_hosts_lists_every_address_a_client_uses() -> None:
    plan = make()
    keys = {n.name: fake_key(i) for i, n in enumerate(plan.containers)}
    lines = {line.split()[0].split(",")[0]: line for line in P.known_hosts(plan, keys).splitlines()}
    gpu1 = lines["gpu1"].split()
    assert gpu1[0].split(",") == ["gpu1", plan.address("gpu1"), plan.address("gpu1", v6=True)]
    assert " ".join(gpu1[1:]) == " ".join(keys["gpu1"].split()[:2])
    assert plan.address("bastion", "prv") in lines["bastion"]


def test_the_inventory_it_writes_loads(tmp_path: Path) -> None:
    plan = make(gpus=3, directory=str(tmp_path))
    doc = P.inventory_doc(plan, {"alice": fake_key(1), "bob": fake_key(2)}, jupyter=True)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    inv = load_inventory(path)
    assert [h.name for h in inv.hosts] == ["gpu1", "gpu2", "gpu3"]
    assert all(h.jump_chain == ("bastion",) for h in inv.hosts)
    assert inv.node("bastion").egress == (f"{plan.address('bastion', 'prv')}/32",
                                          f"{plan.address('bastion', 'prv', v6=True)}/128")
    assert inv.identity_file == f"{tmp_path}/id_ed25519"
    assert inv.known_hosts == f"{tmp_path}/known_hosts"
    jupyter = inv.hosts[0].service("jupyter")
    assert jupyter and jupyter.venv == "/opt/venv" and "jupyter server" in (jupyter.command or "")
    tb = inv.hosts[0].service("tensorboard")
    assert tb and tb.logdir == "/srv/runs"
    assert inv.dns and inv.dns.resolvers == (plan.address("resolver"),)
    zone = inv.dns.zones[0]
    assert (zone.name, zone.provider, zone.settings.server) == ("lab.test", "rfc2136", plan.address("ns1"))
    assert zone.settings.tsig_key_file == f"{tmp_path}/tsig.key"


def test_without_jupyter_server_a_stand_in_command_is_used(tmp_path: Path) -> None:
    doc = P.inventory_doc(make(directory=str(tmp_path)), {"alice": fake_key(1), "bob": fake_key(2)},
                          jupyter=False)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc))
    svc = load_inventory(path).hosts[0].service("jupyter")
    assert svc and "http.server" in (svc.command or "")


def test_state_round_trip() -> None:
    plan = P.make_plan("x1", 3, "/srv/lab", venv="/v", repo=None, extra_binds=("/py",))
    doc = P.state_doc(plan, {"gpu1": 42}, "up")
    assert P.plan_from_state(doc) == plan


def test_machine_limits_are_only_ever_raised() -> None:
    low = {"fs/inotify/max_user_instances": 128, "fs/inotify/max_user_watches": 10**7}
    assert P.raise_to_minimums(low) == {"fs/inotify/max_user_instances": 8192}
    assert P.raise_to_minimums({k: v + 1 for k, v in P.HOST_MINIMUMS.items()}) == {}


def test_ula_prefix_is_canonical_for_every_name() -> None:
    """Addresses are compared with what ipaddress prints (the inventory model normalises);
    a /48 like fdf2:0bf1:... once broke lab tests for some lab names."""
    import ipaddress

    from provision.lab.plan import ula_for

    for i in range(2000):
        prefix = ula_for(f"pytest-{i:06x}")
        address = f"{prefix}:2::101"
        assert str(ipaddress.ip_address(address)) == address


def test_the_inventory_it_writes_has_no_error_findings(tmp_path: Path) -> None:
    """`provision check` on the lab's inventory: its bastion once had no allow_ssh_from, so
    the firewall would have locked the operator out (and `make demo` stopped there)."""
    from provision.exposure import findings

    plan = make(directory=str(tmp_path))
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(P.inventory_doc(plan, {"alice": fake_key(1), "bob": fake_key(2)},
                                                   jupyter=True)))
    inv = load_inventory(path)
    assert [f for f in findings(inv) if f.severity == "error"] == []
    assert inv.node("bastion").ssh_from == (plan.subnet4("pub"), plan.subnet6("pub"))


def test_user_managers_are_never_stopped_in_lab_containers() -> None:
    """A stopped user@UID.service hung in final-sigkill (cgroup v1) and stalled every new
    login of that user for minutes: the lab keeps user managers running."""
    import configparser

    conf = configparser.ConfigParser(comment_prefixes=("#",))
    conf.read_string(P.logind_conf())
    assert conf["Login"]["UserStopDelaySec"] == "infinity"


def test_lab_up_waits_longer_for_more_hosts() -> None:
    assert P.boot_timeout(len(make(gpus=2).containers), 90) == 90
    assert len(make(gpus=16).containers) == 19  # with the bastion, ns1 and the resolver
    assert P.boot_timeout(19, 90) == 90 + 1.5 * 11
    assert P.boot_timeout(len(make(gpus=P.MAX_GPUS).containers), 90) == 90 + 1.5 * 123


def test_a_probe_that_times_out_is_not_ready_yet_and_says_so() -> None:
    """`lab up` of 128 hosts failed at once when one login took over 20 s (the hosts were
    still booting on two cores): a probe that times out is asked again until the deadline."""
    import subprocess

    from provision.lab.shell import _Check

    def slow() -> tuple[bool, str]:
        raise subprocess.TimeoutExpired(["ssh", "-F", "/dev/null", "admin@10.0.2.109", "true"], 20)

    check = _Check("login", slow)
    assert check() is False
    assert check.seen == "ssh did not answer within 20 s"
