"""A service gets HF_TOKEN from a secret in the inventory (issue 37; docs/secrets.md), on a
real host with a member without sudo on it (bob, over his own SSH login).

The secret is encrypted here with the age binary to the lab team's SSH keys; the operator
decrypts with alice's private key ($PROVISION_IDENTITY). On gpu1, bob finds the value in
no file he can read, in no process's command line or environment he can read, not in
`ps`, `systemctl show` nor the journal (root's whole journal neither); root finds it only
in the service's root-only credentials file and the service's own environment; the
service itself sees it. Changing the secret restarts that service only, and the apply
after that changes nothing, in one remote command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P

from .conftest import FAULTY, PROVISION, Lab, one_host_inventory
from .test_dns import _ask

pytestmark = pytest.mark.lab

HOST = "gpu1"
TRAINER, OTHER = "provision-trainer.service", "provision-other.service"
CRED_FILE = "/etc/provision/credentials/trainer/hf_token.env"
# the service's own check of what it was given: its PID and sha256 of $HF_TOKEN, in its
# home (0600); the script then execs the server, so the PID is the unit's MainPID
SEEN = "/var/lib/provision-services/svc-trainer/hf_token.sha256"
SCRIPT = "/usr/local/bin/provision-test-trainer"
SCRIPT_TEXT = """#!/bin/sh
umask 077
echo "$$ $(printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1)" > hf_token.sha256
exec /usr/bin/python3 -m http.server --bind "$1" "$2"
"""
PLAYBOOK = "name: secrets\nhosts: [all]\nsteps: [users, services]\n"
# where bob looks (recursively where a directory)
BOB_LOOKS = "/etc /run /var/lib/provision* /var/log /proc/[0-9]*/environ /proc/[0-9]*/cmdline"


def encrypt(lab: Lab, value: str) -> str:
    """`value` encrypted with the age binary to alice's and bob's SSH keys (the team's)."""
    args = []
    for who in ("alice", "bob"):
        args += ["-r", (lab.dir / "team" / f"{who}.pub").read_text().strip()]
    return subprocess.run(["age", "--encrypt", "--armor", *args], input=value.encode(),
                          capture_output=True, check=True, timeout=60).stdout.decode()


def write_inventory(lab: Lab, d: Path, value: str) -> Path:
    doc = one_host_inventory(lab, HOST, services={
        "trainer": {"port": 8141, "command": f"{SCRIPT} {{bind}} {{port}}",
                    "environment": {"NCCL_DEBUG": "INFO"}, "secrets": {"hf_token": "HF_TOKEN"}},
        "other": {"port": 8142, "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}})
    doc["secrets"] = {"hf_token": encrypt(lab, value)}
    path = d / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def apply(lab: Lab, world: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    return lab.provision_json("apply", HOST, "--yes", "-i", str(world["inventory"]),
                              "--playbook", str(world["playbook"]),
                              env={"PROVISION_IDENTITY": str(lab.dir / "team" / "alice")})


def as_bob(lab: Lab, command: str, value: str = "") -> subprocess.CompletedProcess[str]:
    """A shell command as bob over his own SSH login; `value` arrives on its stdin (so the
    plaintext is on no command line of the host while he looks for it)."""
    return lab.op("ssh", "-F", str(lab.ssh_config), "-o", f"UserKnownHostsFile={lab.known_hosts}",
                  "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                  "-o", "ClearAllForwardings=yes", "-o", "ConnectTimeout=5",
                  "-l", "bob", "-i", str(lab.dir / "team" / "bob"), "-o", "IdentitiesOnly=yes",
                  HOST, shlex.join(["sh", "-c", command]), input=value, check=False)


def as_root(lab: Lab, command: str, value: str) -> subprocess.CompletedProcess[str]:
    """A shell command as root on the host (nsenter), `value` on its stdin."""
    return subprocess.run(["nsenter", "-t", str(lab.leader(HOST)), "-a", "--", "sh", "-c", command],
                          input=value, capture_output=True, text=True, timeout=120, check=False)


def unit_state(lab: Lab, unit: str) -> tuple[str, str]:
    out = lab.host(HOST, "systemctl", "show", "-p", "MainPID", "-p", "ActiveEnterTimestamp",
                   "--value", unit).stdout.split("\n")
    return out[0], out[1]


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def seen_by_service(lab: Lab) -> str:
    """The sha256 of $HF_TOKEN that the unit's current main process wrote (waiting until
    it has: the file names the PID that wrote it)."""
    pid = unit_state(lab, TRAINER)[0]
    got = lab.host(HOST, "sh", "-c", f"for i in $(seq 300); do read -r p h < {SEEN} && "
                   f"[ \"$p\" = {pid} ] && echo \"$h\" && exit; sleep 0.1; done", check=False)
    return got.stdout.strip()


@pytest.fixture(scope="module")
def world(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("secrets")
    lab.host(HOST, "sh", "-c", f"cat > {SCRIPT} <<'EOF'\n{SCRIPT_TEXT}EOF\nchmod 0755 {SCRIPT}")
    value = f"hf_{secrets.token_hex(16)}"
    world: dict[str, Any] = {"dir": d, "value": value, "playbook": d / "playbook.yml",
                             "inventory": write_inventory(lab, d, value)}
    world["playbook"].write_text(PLAYBOOK)
    code, data, err = apply(lab, world)
    world["first"] = (code, data, err)
    assert code == 0, err + json.dumps(data, indent=1)
    yield world
    lab.host(HOST, "sh", "-c", f"systemctl disable --now {TRAINER} {OTHER}; "
             f"rm -f /etc/systemd/system/{TRAINER} /etc/systemd/system/{OTHER} {SCRIPT}; "
             "rm -rf /etc/provision/credentials; systemctl daemon-reload", check=False)


def test_the_service_sees_its_secret_and_the_unit_names_only_a_root_only_file(
        lab: Lab, world: dict[str, Any]) -> None:
    assert seen_by_service(lab) == sha(world["value"])
    st = lab.host(HOST, "stat", "-c", "%U %a", "/etc/provision/credentials",
                  "/etc/provision/credentials/trainer", CRED_FILE).stdout.split("\n")
    assert st[:3] == ["root 700", "root 700", "root 400"], st
    show = lab.host(HOST, "systemctl", "show", "-p", "EnvironmentFiles", "-p", "Environment",
                    TRAINER).stdout
    assert f"EnvironmentFiles={CRED_FILE} " in show and "NCCL_DEBUG=INFO" in show, show
    # the apply said which secret it set, never the value
    _, data, err = world["first"]
    said = [a["description"] for h in data["hosts"] for a in h.get("actions", [])]
    assert f"secret hf_token of trainer set ({CRED_FILE})" in said, said
    assert world["value"] not in json.dumps(data) + err


def test_bob_finds_the_value_nowhere_he_can_look(lab: Lab, world: dict[str, Any]) -> None:
    value = world["value"]
    # bob looks with the value on his stdin: first into a copy of it he keeps (the search
    # works), then everywhere he can read; `ps` and `systemctl show` as well
    look = (f"cat > ~/canary; grep -rlsF -f ~/canary ~/canary {BOB_LOOKS}; "
            f"echo ps:; ps auxeww | grep -cF -f ~/canary; "
            f"echo show:; systemctl show {TRAINER} {OTHER} | grep -cF -f ~/canary; "
            f"systemctl show -p EnvironmentFiles --value {TRAINER}; "
            "echo journal:; journalctl --no-pager -o export 2>/dev/null | grep -caF -f ~/canary; "
            "rm -f ~/canary")
    r = as_bob(lab, look, value)
    assert r.stdout.split("\n")[:8] == [
        "/home/bob/canary", "ps:", "0", "show:", "0", f"{CRED_FILE} (ignore_errors=no)",
        "journal:", "0"], r.stdout + r.stderr
    # he cannot read the file it is in
    denied = as_bob(lab, f"cat {CRED_FILE}")
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # root finds it where it is meant to be and nowhere else on disk; in the environment
    # of the service's process alone; never in the journal or a command line
    pid = unit_state(lab, TRAINER)[0]
    found = as_root(lab, "umask 077; cat > /root/.hf; "
                    # the machine's own lab directories, seen through the overlay, aside
                    "grep -rlsF --exclude-dir=provision-lab -f /root/.hf /root/.hf /etc /run "
                    "/var/lib /var/log /proc/[0-9]*/environ /proc/[0-9]*/cmdline; "
                    "echo journal:; journalctl --no-pager -o export | grep -caF -f /root/.hf; "
                    "rm -f /root/.hf", value).stdout
    assert sorted(found.split("\n")[:-3]) == sorted(
        [CRED_FILE, "/root/.hf", f"/proc/{pid}/environ"]), found
    assert found.split("\n")[-3:] == ["journal:", "0", ""], found


def test_a_changed_secret_restarts_its_service_only_then_nothing_changes(
        lab: Lab, world: dict[str, Any]) -> None:
    before_trainer, before_other = unit_state(lab, TRAINER), unit_state(lab, OTHER)
    new = f"hf_{secrets.token_hex(16)}"
    write_inventory(lab, world["dir"], new)
    code, data, err = apply(lab, world)
    assert code == 0, err + json.dumps(data, indent=1)
    said = [a["description"] for h in data["hosts"] for a in h.get("actions", [])]
    assert f"secret hf_token of trainer changed ({CRED_FILE})" in said, said
    assert any(s.startswith(f"systemctl restart {TRAINER}") and "secret hf_token changed" in s
               for s in said), said
    assert not any(OTHER in s for s in said), said
    assert new not in json.dumps(data) + err and world["value"] not in json.dumps(data) + err
    assert unit_state(lab, OTHER) == before_other
    assert unit_state(lab, TRAINER)[0] != before_trainer[0]
    assert seen_by_service(lab) == sha(new)
    world["value"] = new
    # converged: nothing to do, one remote command
    code, data, err = apply(lab, world)
    assert code == 0, err
    (h,) = data["hosts"]
    assert (h["status"], h["changed"], h["changes"], h["remote_execs"]) == ("ok", 0, 0, 1), h


def forbidden(*values: str) -> list[bytes]:
    """What no output may hold: each value, and the base64 of the file sent for it (what a
    batch script echoed back would show)."""
    out = []
    for v in values:
        sent = f'HF_TOKEN="{v}"\n'.encode()
        out += [v.encode(), base64.encodebytes(sent).split(b"\n")[0]]
    return out


def test_plan_and_apply_print_no_value_and_a_bad_value_applies_nothing(
        lab: Lab, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """plan and apply, as text and --json, stdout and stderr, and the batch's own output
    on the host, hold neither the old nor the new value; then a value with a newline for
    HF_TOKEN fails the run (exit 1) before the host is touched."""
    monkeypatch.setenv("PROVISION_IDENTITY", str(lab.dir / "team" / "alice"))
    old, new = world["value"], f"hf_{secrets.token_hex(16)}"
    write_inventory(lab, world["dir"], new)
    args = (HOST, "-i", str(world["inventory"]), "--playbook", str(world["playbook"]))
    batch = world["dir"] / "batch-output"
    outputs: dict[str, bytes] = {}
    for name, cmd in (("plan", [*PROVISION, "plan", *args]),
                      ("plan --json", [*PROVISION, "plan", *args, "--json"]),
                      ("apply", [*FAULTY, "--batch-output", str(batch), "--", "apply", "--yes", *args]),
                      ("apply --json", [*PROVISION, "apply", "--yes", *args, "--json"])):
        r = lab.op(*cmd, check=False, timeout=240)
        outputs[name] = (r.stdout + r.stderr).encode()
        assert r.returncode == 0, (name, r.stdout, r.stderr)
    outputs["batch"] = batch.read_bytes()
    assert b"secret hf_token of trainer changed" in outputs["plan"], outputs["plan"]
    assert b"secret hf_token of trainer changed" in outputs["apply"], outputs["apply"]
    assert b"@done" in outputs["batch"], outputs["batch"]  # the batch ran and said so
    leaks = {name: v for name, out in outputs.items() for v in forbidden(old, new) if v in out}
    assert leaks == {}, leaks
    assert seen_by_service(lab) == sha(new)
    world["value"] = new

    # a value the environment file cannot hold: exit 1 naming the way out, nothing applied
    before = unit_state(lab, TRAINER), lab.host(HOST, "stat", "-c", "%Y %s", CRED_FILE).stdout
    write_inventory(lab, world["dir"], "hf_first_line\nhf_second_line")
    for cmd in (["plan", *args], ["apply", "--yes", *args], ["apply", "--yes", *args, "--json"]):
        r = lab.op(*PROVISION, *cmd, check=False, timeout=240)
        out = r.stdout + r.stderr
        assert r.returncode == 1 and "cannot be the environment variable HF_TOKEN" in out, out
        assert "hf_first_line" not in out and "hf_second_line" not in out, out
    after = unit_state(lab, TRAINER), lab.host(HOST, "stat", "-c", "%Y %s", CRED_FILE).stdout
    assert after == before
    assert seen_by_service(lab) == sha(new)
    write_inventory(lab, world["dir"], new)


def test_the_tsig_key_from_a_secret_updates_the_labs_bind(lab: Lab, tmp_path: Path) -> None:
    """The lab's zone with `tsig_key_secret` instead of `tsig_key_file`: dns apply decrypts
    the key (alice's identity), ns1 serves the record, a second plan is empty; `check`
    decrypts nothing; no output holds the key's secret."""
    key_text = lab.tsig_key_file.read_text()
    secret = key_text.split('secret "')[1].split('"')[0]
    doc = yaml.safe_load(lab.inventory.read_text())
    zone = doc["dns"]["zones"][P.ZONE]
    del zone["tsig_key_file"]
    zone["tsig_key_secret"] = "lab_tsig"
    new_app = f"10.{lab.plan.octet}.1.202"
    zone["records"]["app"] = {"type": "A", "values": [new_app], "ttl": 60}
    doc["secrets"] = {"lab_tsig": encrypt(lab, key_text)}
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    alice = {"PROVISION_IDENTITY": str(lab.dir / "team" / "alice")}
    outputs = []
    code, data, err = lab.provision_json("check", "-i", str(inv),
                                         env={"PROVISION_IDENTITY": str(tmp_path / "absent")})
    outputs.append(json.dumps(data) + err)
    assert code == 0 and "TSIG key from secret lab_tsig" in json.dumps(data), (data, err)
    try:
        code, data, err = lab.provision_json("dns", "apply", "-i", str(inv), "--yes", env=alice)
        outputs.append(json.dumps(data) + err)
        assert code == 0 and data["zones"][0]["applied"] is True, (data, err)
        assert _ask(lab, lab.addr("ns1"), "app", "A") == ("NOERROR", [new_app], True)
        code, data, err = lab.provision_json("dns", "plan", "-i", str(inv), "--detailed-exitcode",
                                             env=alice)
        outputs.append(json.dumps(data) + err)
        assert code == 0 and data["summary"] == {"add": 0, "change": 0, "destroy": 0}, (data, err)
        # bob's key decrypts it too (he is in the team), a stranger's does not: exit 1
        stranger = tmp_path / "stranger"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                       check=True)
        code, data, err = lab.provision_json("dns", "plan", "-i", str(inv),
                                             env={"PROVISION_IDENTITY": str(stranger)})
        outputs.append(json.dumps(data) + err)
        assert code == 1 and "encrypted to: alice, bob" in err, (data, err)
        assert [o for o in outputs if secret in o] == []
    finally:
        code, data, err = lab.provision_json("dns", "apply", "-i", str(lab.inventory), "--yes")
        assert code == 0, (data, err)
