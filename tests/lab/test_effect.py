"""Hardening that does not take effect is a failure, not a green apply (issue 20, items 1, 4, 5).

On gpu2, made to look like a real image in each test (written here through the lab's exec):
an earlier drop-in with `PasswordAuthentication yes` + `AuthenticationMethods any` (what
cloud-init writes), the same in a `Match` block, a line above the `Include` in
sshd_config; then `apply` must fail naming the file and line and roll back, `plan` must
show a change, `audit` must exit 1 with an error naming the file and line. Also: hosts
provision does not support are refused before anything changes (an os-release rewritten to
Alpine, an sshd_config without the Include), and sshd started from `ssh.socket` (Debian 12
ships it disabled, the lab masks it: unmasked and enabled here) converges; and a firewall
whose chain another rule bypasses (an ACCEPT inserted above our jump) fails its commit.

Only the sshd step (or the firewall step) runs, a playbook of its own, so each case costs
one apply. Every test restores /etc/ssh (and the firewall) as the module found them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Lab, one_host_inventory

pytestmark = pytest.mark.lab

HOST = "gpu2"
DROPIN = "/etc/ssh/sshd_config.d/00-provision.conf"
CLOUD = "/etc/ssh/sshd_config.d/01-cloud-init.conf"  # sorts after ours, before 50-*
EARLY = "/etc/ssh/sshd_config.d/00-aaa-cloud.conf"  # sorts before ours
CONFIRM = "30"
SAVED = "/root/provision-test-etc-ssh.tar"


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("effect")
    doc = one_host_inventory(lab, HOST)
    inv = d / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    book = d / "sshd-only.yml"
    book.write_text("name: sshd-only\nhosts: [all]\nsteps: [sshd]\n")
    # /etc/ssh as this module found it (an earlier module may have hardened gpu2)
    lab.host(HOST, "tar", "-C", "/etc", "-cf", SAVED, "ssh")
    yield {"inventory": inv, "playbook": book}
    _restore(lab, ours=True)
    lab.host(HOST, "rm", "-f", SAVED)


def _restore(lab: Lab, ours: bool = False) -> None:
    """Back to the saved /etc/ssh; each test starts without our drop-in (`ours=False`)."""
    lab.host(HOST, "sh", "-c", "; ".join([
        "rm -rf /etc/ssh/sshd_config.d", f"tar -C /etc -xf {SAVED}",
        *([] if ours else [f"rm -f {DROPIN}"]),
        "rm -rf /var/lib/provision/commit",
        "systemctl reload ssh.service",
    ]), check=False)


@pytest.fixture(autouse=True)
def clean(lab: Lab, world: dict[str, Path]) -> Iterator[None]:
    _restore(lab)
    yield
    _restore(lab)


def put(lab: Lab, path: str, text: str) -> None:
    r = subprocess.run(["nsenter", "-t", str(lab.leader(HOST)), "-a", "--", "sh", "-c",
                        f"cat > {path} && chmod 644 {path} && systemctl reload-or-restart ssh.service"],
                       input=text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def run(lab: Lab, world: dict[str, Path], command: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = [command, "-i", str(world["inventory"]), "--playbook", str(world["playbook"])]
    if command == "apply":
        args += ["--yes", "--confirm-timeout", CONFIRM]
    return lab.provision_json(*args, *extra, HOST)


def host(data: dict[str, Any]) -> dict[str, Any]:
    (h,) = data["hosts"]
    return h  # type: ignore[no-any-return]


def effective(lab: Lab, key: str, user: str = "") -> str:
    cmd = ["/usr/sbin/sshd", "-T"] + (["-C", f"user={user}"] if user else [])
    out = lab.host(HOST, *cmd).stdout
    return next((ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith(key + " ")), "")


def audit(lab: Lab, world: dict[str, Path]) -> tuple[int, dict[str, Any]]:
    code, data, _ = lab.provision_json("audit", "-i", str(world["inventory"]), "--no-aws", HOST)
    return code, data


def findings(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    (h,) = data["hosts"]
    return [f for f in h["findings"] if f["code"] == kind]


# --- an earlier drop-in ----------------------------------------------------------------------

def test_earlier_dropin_fails_the_first_apply_and_rolls_back(lab: Lab, world: dict[str, Path]) -> None:
    put(lab, EARLY, "PasswordAuthentication yes\nAuthenticationMethods any\n")
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3, err
    (action,) = host(data)["actions"]
    assert "will not take effect" in action["description"] and f"{EARLY}:1" in action["description"]
    code, data, err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and h["status"] == "failed", h
    assert f"{EARLY}:1" in h["error"] and "passwordauthentication yes" in h["error"], h["error"]
    assert "rolled back at once" in h["error"], h["error"]
    # rolled back: our drop-in is gone again, nothing left armed
    assert lab.host(HOST, "test", "-e", DROPIN, check=False).returncode == 1
    assert lab.host(HOST, "ls", "-A", "/var/lib/provision/commit", check=False).stdout.strip() == ""


def test_dropin_overridden_later_plan_apply_audit_all_say_so(lab: Lab, world: dict[str, Path]) -> None:
    code, data, err = run(lab, world, "apply")
    assert code == 0, err + json.dumps(data)
    assert effective(lab, "passwordauthentication") == "no"
    code, data = audit(lab, world)
    assert not findings(data, "sshd-weak"), data
    # now cloud-init (say) adds its drop-in before ours: the file is ours, the effect is not
    put(lab, EARLY, "PasswordAuthentication yes\nAuthenticationMethods any\n")
    assert effective(lab, "passwordauthentication") == "yes"
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3, err + json.dumps(data)
    (action,) = host(data)["actions"]
    assert "not in effect" in action["description"] and f"{EARLY}:1" in action["description"], action
    code, data, err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and h["status"] == "failed" and f"{EARLY}:1" in h["error"], h
    assert lab.host(HOST, "test", "-f", DROPIN, check=False).returncode == 0  # ours, restored
    code, data = audit(lab, world)
    assert code == 1
    weak = findings(data, "sshd-weak")
    assert weak and all(f["severity"] == "error" for f in weak), data
    assert any(f"{EARLY}:1" in f["message"] and "passwordauthentication" in f["message"]
               for f in weak), weak


def test_match_block_overriding_one_user_is_named(lab: Lab, world: dict[str, Path]) -> None:
    # (not `AuthenticationMethods any` here: OpenSSH 9.2 rejects "any" in a Match block once a
    # global value is set, and the candidate would fail `sshd -t`: refused, nothing changed)
    put(lab, CLOUD, "Match User alice\n    PasswordAuthentication yes\n")
    assert effective(lab, "passwordauthentication", "alice") == "yes"
    code, data, err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and h["status"] == "failed", h
    assert f"{CLOUD}:2" in h["error"] and "Match User alice" in h["error"], h["error"]
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3, err
    code, data = audit(lab, world)
    assert code == 1
    assert any("for user alice" in f["message"] and f"{CLOUD}:2" in f["message"]
               for f in findings(data, "sshd-weak")), data


def test_line_above_the_include_is_named(lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sh", "-c", "sed -i '1i KbdInteractiveAuthentication yes' /etc/ssh/sshd_config "
             "&& systemctl reload ssh.service")
    code, data, _err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and h["status"] == "failed", h
    assert "/etc/ssh/sshd_config:1" in h["error"] and "kbdinteractiveauthentication yes" in h["error"], h
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3 and "/etc/ssh/sshd_config:1" in host(data)["actions"][0]["description"], err
    code, data = audit(lab, world)
    assert code == 1
    assert any("/etc/ssh/sshd_config:1" in f["message"] for f in findings(data, "sshd-weak")), data


def test_our_dropin_under_its_old_name_is_removed(lab: Lab, world: dict[str, Path]) -> None:
    old = "/etc/ssh/sshd_config.d/50-provision.conf"
    put(lab, old, "# Managed by provision for gpu2; do not edit.\nX11Forwarding no\n")
    code, data, err = run(lab, world, "apply")
    assert code == 0 and host(data)["status"] == "changed", err + json.dumps(data)
    assert lab.host(HOST, "test", "-e", old, check=False).returncode == 1
    assert lab.host(HOST, "test", "-f", DROPIN, check=False).returncode == 0


# --- unsupported hosts -----------------------------------------------------------------------

def test_unsupported_hosts_are_refused_before_anything_changes(lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sh", "-c", "cp -a /etc/os-release /etc/os-release.provision-test; "
             "rm /etc/os-release; printf 'ID=alpine\\nVERSION_ID=3.19.1\\n' > /etc/os-release")
    try:
        code, data, _err = run(lab, world, "apply")
    finally:
        lab.host(HOST, "sh", "-c", "rm -f /etc/os-release; "
                 "mv /etc/os-release.provision-test /etc/os-release")
    h = host(data)
    assert code == 1 and h["status"] == "failed" and h["changed"] == 0, h
    assert "alpine 3.19.1 is not a Debian-family OS" in h["error"], h
    assert h["remote_execs"] == 1  # the probe only
    assert lab.host(HOST, "test", "-e", DROPIN, check=False).returncode == 1
    # an sshd_config without the Include: the drop-in would never be read
    lab.host(HOST, "sed", "-i", "/^Include/d", "/etc/ssh/sshd_config")
    code, data, _err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and h["status"] == "failed" and "has no `Include" in h["error"], h
    assert lab.host(HOST, "test", "-e", DROPIN, check=False).returncode == 1


# --- sshd started from ssh.socket ------------------------------------------------------------

SOCKET_ON = "; ".join([
    "rm -f /etc/systemd/system/ssh.socket",  # the lab's mask
    "systemctl daemon-reload",
    "systemctl disable -q ssh.service",
    "systemctl enable -q ssh.socket",
    "systemctl stop ssh.service",
    "systemctl start ssh.socket",
])
SOCKET_OFF = "; ".join([
    "sed -i '/^Port 2222$/d' /etc/ssh/sshd_config",
    "systemctl disable -q --now ssh.socket",
    "ln -sf /dev/null /etc/systemd/system/ssh.socket",
    "systemctl daemon-reload",
    "systemctl enable -q ssh.service",
    "systemctl restart ssh.service",
])


def test_socket_activated_sshd_converges_and_a_port_change_is_refused(
        lab: Lab, world: dict[str, Path]) -> None:
    lab.host(HOST, "sh", "-ec", SOCKET_ON)
    try:
        assert lab.host(HOST, "systemctl", "is-active", "ssh.service", check=False).stdout.strip() \
            == "inactive"
        code, data, err = run(lab, world, "apply")
        h = host(data)
        assert code == 0 and h["status"] == "changed", err + json.dumps(h)
        # validated, reloaded, read back and confirmed over a new connection, through the socket
        assert lab.host(HOST, "systemctl", "is-active", "ssh.socket").stdout.strip() == "active"
        assert effective(lab, "passwordauthentication") == "no"
        code, data, err = run(lab, world, "plan", "--detailed-exitcode")
        assert code == 0 and host(data)["changes"] == 0, err + json.dumps(data)
        # a Port line in sshd_config never reaches the socket on Debian (no generator)
        lab.host(HOST, "sh", "-c", "sed -i '1i Port 2222' /etc/ssh/sshd_config")
        code, data, err = run(lab, world, "plan")
        h = host(data)
        assert code == 1 and h["status"] == "failed", h
        assert "started from ssh.socket, which listens on [::]:22" in h["error"], h["error"]
        assert "*:2222" in h["error"], h["error"]
    finally:
        lab.host(HOST, "sh", "-c", SOCKET_OFF, check=False)


# --- the firewall: something in the way ------------------------------------------------------

UNFIREWALL = "; ".join([
    "iptables -w -D INPUT -j ACCEPT",
    "systemctl disable --now provision-firewall.service",
    "rm -f /etc/iptables/rules.v4 /etc/iptables/rules.v6 /etc/iptables/provision-docker.v4 "
    "/etc/iptables/provision-docker.v6 /usr/local/sbin/provision-firewall "
    "/etc/systemd/system/provision-firewall.service",
    "systemctl daemon-reload",
    *(f"{t} -w -D INPUT -j PROVISION-INPUT; {t} -w -F PROVISION-INPUT; {t} -w -X PROVISION-INPUT"
      for t in ("iptables", "ip6tables")),
    "rm -rf /var/lib/provision/commit",
])


def test_an_accept_all_placed_before_our_chain_fails_the_firewall_commit(
        lab: Lab, world: dict[str, Path]) -> None:
    book = world["playbook"].with_name("firewall-only.yml")
    book.write_text("name: firewall-only\nhosts: [all]\nsteps: [firewall]\n")
    base = ["-i", str(world["inventory"]), "--playbook", str(book)]
    # an earlier module's bootstrap may have left gpu2 firewalled: leave it as found
    had = lab.host(HOST, "test", "-e", "/usr/local/sbin/provision-firewall", check=False).returncode == 0
    try:
        code, data, err = lab.provision_json("apply", *base, "--yes", "--confirm-timeout", CONFIRM, HOST)
        assert code == 0 and host(data)["status"] in ("changed", "ok"), err + json.dumps(data)
        code, data, err = lab.provision_json("plan", *base, "--detailed-exitcode", HOST)
        assert code == 0, err + json.dumps(data)
        # another tool inserts an accept-everything rule above our jump
        lab.host(HOST, "iptables", "-w", "-I", "INPUT", "1", "-j", "ACCEPT")
        code, data, err = lab.provision_json("plan", *base, "--detailed-exitcode", HOST)
        assert code == 3, err + json.dumps(data)
        (action,) = host(data)["actions"]
        assert "live rules: IPv4: an ACCEPT rule before PROVISION-INPUT in INPUT" in action["description"]
        code, data, err = lab.provision_json("apply", *base, "--yes", "--confirm-timeout", CONFIRM, HOST)
        h = host(data)
        assert code == 1 and h["status"] == "failed", h
        assert "an ACCEPT rule before PROVISION-INPUT in INPUT (`-A INPUT -j ACCEPT`)" in h["error"], h
        assert "rolled back at once" in h["error"], h
        v4 = lab.host(HOST, "iptables", "-w", "-S", "INPUT").stdout.splitlines()
        assert v4[1:3] == ["-A INPUT -j ACCEPT", "-A INPUT -j PROVISION-INPUT"], v4  # as before
        code, data = audit(lab, world)
        assert code == 1
        (f,) = findings(data, "firewall-bypassed")
        assert f["severity"] == "error" and "`-A INPUT -j ACCEPT`" in f["message"], f
    finally:
        lab.host(HOST, "sh", "-c", "iptables -w -D INPUT -j ACCEPT" if had else UNFIREWALL,
                 check=False)


# --- the hidden check's classes: any user, any address, any file name, a real password login --

PASSWORD = "Lab-Passw0rd-Only"  # set on gpu2 by the tests below, never anywhere else
LOCALS = ("carol", "alice")  # carol: a local account the inventory does not know


@pytest.fixture
def passwords(lab: Lab) -> Iterator[None]:
    """Local accounts with a password on gpu2: what a password login needs. Afterwards the
    ones made here are removed (their login's user manager ended first, or userdel refuses)
    and the ones an earlier module made (provision's team) get their password field back."""
    before: dict[str, str | None] = {}
    for u in LOCALS:
        r = lab.host(HOST, "getent", "shadow", u, check=False)
        before[u] = r.stdout.split(":")[1] if r.returncode == 0 else None
        if before[u] is None:
            lab.host(HOST, "useradd", "-m", "-s", "/bin/sh", u)
    r = subprocess.run(["nsenter", "-t", str(lab.leader(HOST)), "-a", "--", "chpasswd"],
                       input="".join(f"{u}:{PASSWORD}\n" for u in LOCALS), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    yield
    for u, field in before.items():
        lab.host(HOST, "loginctl", "terminate-user", u, check=False)
        if field is None:
            lab.host(HOST, "userdel", "-f", "-r", u)
        else:
            lab.host(HOST, "usermod", "-p", field, u)


def password_login(lab: Lab, world: dict[str, Path], user: str) -> bool:
    """A real password login to gpu2 as `user` (paramiko, through the bastion, gpu2's host
    key checked against the lab's known_hosts): True when sshd lets it in."""
    import paramiko

    from provision.inventory import load_inventory
    from provision.ssh.connect import connect

    inv = load_inventory(world["inventory"])
    with lab.operator_netns():
        chain = connect(inv, inv.node("bastion"))
    try:
        assert chain.conn.transport is not None
        addr = lab.addr(HOST)
        chan = chain.conn.transport.open_channel("direct-tcpip", (addr, 22), ("127.0.0.1", 0))
        t = paramiko.Transport(chan)
        try:
            t.start_client(timeout=15)
            known = paramiko.HostKeys(str(lab.known_hosts))
            key = t.get_remote_server_key()
            entry = known.lookup(addr) or known.lookup(HOST)
            assert entry is not None and entry.get(key.get_name()) == key, "gpu2's host key"
            try:
                t.auth_password(user, PASSWORD)
            except paramiko.AuthenticationException:
                return False
            return t.is_authenticated()
        finally:
            t.close()
    finally:
        chain.close()


def no_green_weakness(lab: Lab, world: dict[str, Path], user: str) -> str:
    """The invariant the issue asks for, read from the host: after `apply`, a password login
    succeeds only if apply failed; `plan` then shows a change and `audit` exits 1."""
    code, data, err = run(lab, world, "apply")
    weak = password_login(lab, world, user)
    assert not (code == 0 and weak), f"apply exited 0 and {user} logs in with a password: {data}"
    assert code == 1 and host(data)["status"] == "failed", err + json.dumps(data)
    error = str(host(data)["error"])
    code, data, err = run(lab, world, "plan", "--detailed-exitcode")
    assert code == 3, err + json.dumps(data)
    code, data = audit(lab, world)
    assert code == 1 and findings(data, "sshd-weak"), data
    return error


def test_match_block_for_a_user_outside_the_team(lab: Lab, world: dict[str, Path],
                                                 passwords: None) -> None:
    """carol is no team member, so `sshd -T -C` is never asked about her: the Match block
    itself must count. The login proves it is a way in (not a check that cannot fail)."""
    put(lab, "/etc/ssh/sshd_config.d/99-local.conf",
        "Match User carol\n    PasswordAuthentication yes\n    AuthenticationMethods password\n")
    assert password_login(lab, world, "carol")  # the way in is real before apply
    error = no_green_weakness(lab, world, "carol")
    assert "99-local.conf:2 (in `Match User carol`)" in error and "rolled back at once" in error


def test_match_address_the_probe_does_not_come_from(lab: Lab, world: dict[str, Path]) -> None:
    """Passwords from an address range the probe's connection is not in."""
    put(lab, "/etc/ssh/sshd_config.d/99-local.conf",
        "Match Address 192.0.2.0/24\n    PasswordAuthentication yes\n")
    code, data, err = run(lab, world, "apply")
    h = host(data)
    assert code == 1 and "99-local.conf:2" in h["error"], err + json.dumps(data)
    code, data = audit(lab, world)
    assert code == 1 and any("Match Address 192.0.2.0/24" in f["message"]
                             for f in findings(data, "sshd-weak")), data


def test_earlier_dropin_whose_name_has_a_space(lab: Lab, world: dict[str, Path],
                                               passwords: None) -> None:
    """`0 cloud.conf` sorts before ours; its Match block lets alice in with a password."""
    put(lab, "'/etc/ssh/sshd_config.d/0 cloud.conf'",
        "Match User alice\n    PasswordAuthentication yes\n    AuthenticationMethods any\n")
    assert password_login(lab, world, "alice")
    assert "/0 cloud.conf:2 (in `Match User alice`)" in no_green_weakness(lab, world, "alice")


@pytest.mark.parametrize("name,text,key", [
    ("0.conf", "PermitRootLogin yes\n", "permitrootlogin"),
    ("-x.conf", "ChallengeResponseAuthentication yes\n", "kbdinteractiveauthentication"),
    ("99-late.conf", "Match all\n    PermitEmptyPasswords yes\n", "permitemptypasswords"),
])
def test_earlier_or_match_all_settings_are_named(lab: Lab, world: dict[str, Path], name: str,
                                                 text: str, key: str) -> None:
    """Names sorting before `00-`, an alias spelling, a `Match all` in a later file (it
    applies to every connection, and `sshd -T` shows it): each fails naming its file:line."""
    path = f"/etc/ssh/sshd_config.d/{name}"
    put(lab, path, text)
    code, data, err = run(lab, world, "apply")
    h = host(data)
    line = text.count("\n")
    assert code == 1 and f"{path}:{line}" in h["error"] and key in h["error"], err + json.dumps(h)


def test_a_match_block_past_the_probes_file_cap_is_still_asked_about(
        lab: Lab, world: dict[str, Path]) -> None:
    """The probe sends at most 64 config files; a Match block in a file past that (a third
    level of Includes) must not make sshd look the same for every user (no `sshd -T -C`)."""
    lab.host(HOST, "sh", "-c", "mkdir -p /etc/ssh/extra.d && for i in $(seq 10 73); do "
             ": > /etc/ssh/sshd_config.d/$i-filler.conf; done && "
             "echo 'Include /etc/ssh/extra.d/*.conf' > /etc/ssh/sshd_config.d/99-inc.conf")
    try:
        put(lab, "/etc/ssh/extra.d/a.conf",
            "Match User alice\n    PasswordAuthentication yes\n    AuthenticationMethods password\n")
        assert effective(lab, "passwordauthentication", "alice") == "yes"
        code, data, err = run(lab, world, "apply")
        h = host(data)
        assert code == 1 and "for user alice shows passwordauthentication yes" in h["error"], \
            err + json.dumps(h)
        code, data = audit(lab, world)
        assert code == 1 and findings(data, "sshd-weak"), data
    finally:
        lab.host(HOST, "rm", "-rf", "/etc/ssh/extra.d", check=False)
