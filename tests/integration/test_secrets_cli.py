"""`provision secrets` with real keys: set, show, check and rekey against the `age`
binary, with ssh-ed25519 and ssh-rsa keys made here; the inventory rewritten in place."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from provision.cli import main
from provision.secretdata.armor import read
from provision.secretdata.recipients import key_tag

pytestmark = pytest.mark.skipif(shutil.which("age") is None or shutil.which("ssh-keygen") is None,
                                reason="needs age and ssh-keygen")
VALUE = b"hf_Zq9-not-a-real-token"


def _key(tmp: Path, name: str, kind: str = "ed25519") -> tuple[Path, str]:
    path = tmp / name
    args = ["-t", kind] + (["-b", "2048"] if kind == "rsa" else [])
    subprocess.run(["ssh-keygen", "-q", *args, "-N", "", "-C", name, "-f", str(path)], check=True)
    return path, (tmp / f"{name}.pub").read_text().strip()


def _inventory(tmp: Path, team: dict[str, str], comment: str = "# our team\n") -> Path:
    lines = ["version: 1", comment.rstrip("\n"), "team:"]
    for name, key in team.items():
        lines += [f"  {name}:", f"    keys: [\"{key}\"]  # {name}'s laptop"]
    inv = tmp / "inventory.yml"
    inv.write_text("\n".join(lines) + "\n")
    return inv


def _cli(args: list[str], identity: Path | None = None, stdin: bytes | None = None) -> Result:
    env = {"PROVISION_IDENTITY": str(identity)} if identity else {"PROVISION_IDENTITY": ""}
    return CliRunner().invoke(main, args, input=stdin, env=env)


def _show(inv: Path, identity: Path) -> Result:
    return _cli(["secrets", "show", "hf_token", "-i", str(inv)], identity)


def test_set_show_check_then_rekey_after_a_member_leaves_and_one_joins(tmp_path: Path) -> None:
    alice, alice_pub = _key(tmp_path, "alice")
    bob, bob_pub = _key(tmp_path, "bob", "rsa")
    carol, carol_pub = _key(tmp_path, "carol")
    inv = _inventory(tmp_path, {"alice": alice_pub, "bob": bob_pub})

    r = _cli(["secrets", "set", "hf_token", "-i", str(inv)], stdin=VALUE + b"\n")
    assert r.exit_code == 0, r.output
    assert "encrypted to: alice, bob" in r.output
    text = inv.read_text()
    assert VALUE.decode() not in text
    assert "# our team" in text and "# bob's laptop" in text  # the rest of the file as it was
    assert "-----BEGIN AGE ENCRYPTED FILE-----" in text
    # both members decrypt it: the ed25519 and the rsa key (one trailing newline dropped)
    for key in (alice, bob):
        shown = _show(inv, key)
        assert shown.exit_code == 0, shown.output
        assert shown.stdout_bytes == VALUE
    assert _cli(["secrets", "check", "-i", str(inv)]).exit_code == 0
    # carol cannot: and the error names who it is for
    denied = _show(inv, carol)
    assert denied.exit_code == 1
    assert "encrypted to: alice, bob" in denied.output and VALUE.decode() not in denied.output

    # bob leaves, carol joins: check names both problems without any private key
    inv.write_text(text.replace(bob_pub, carol_pub).replace("bob:", "carol:"))
    checked = _cli(["secrets", "check", "-i", str(inv)])
    assert checked.exit_code == 1
    assert "cannot be decrypted by carol" in checked.output
    assert f"tags {key_tag(bob_pub)}" in checked.output
    # the rekey (by alice) names what changed; then bob's key no longer decrypts, carol's does
    rekeyed = _cli(["secrets", "rekey", "-i", str(inv)], alice)
    assert rekeyed.exit_code == 0, rekeyed.output
    assert f"no longer encrypted to 1 key(s) no longer listed (tags {key_tag(bob_pub)})" in rekeyed.output
    assert "now also encrypted to carol" in rekeyed.output
    assert _show(inv, bob).exit_code == 1
    assert _show(inv, carol).stdout_bytes == VALUE
    tags = read(inv.read_text().split("hf_token: |\n")[1].replace("    ", "")).tags
    assert tags == {key_tag(alice_pub), key_tag(carol_pub)}
    assert _cli(["secrets", "check", "-i", str(inv)]).exit_code == 0


def test_raw_keeps_bytes_and_show_refuses_a_terminal(tmp_path: Path) -> None:
    alice, alice_pub = _key(tmp_path, "alice")
    inv = _inventory(tmp_path, {"alice": alice_pub})
    pem = b"-----BEGIN KEY-----\nabc\n-----END KEY-----\n"
    assert _cli(["secrets", "set", "hf_token", "--raw", "-i", str(inv)], stdin=pem).exit_code == 0
    assert _show(inv, alice).stdout_bytes == pem
    # stdout a terminal (a pty): refused, and nothing of the value reaches it
    parent, child = pty.openpty()
    env = {**os.environ, "PROVISION_IDENTITY": str(alice)}
    cmd = [sys.executable, "-m", "provision", "secrets", "show", "hf_token", "-i", str(inv)]
    done = subprocess.run(cmd, stdout=child, stderr=subprocess.PIPE, env=env, timeout=60, check=False)
    os.close(child)
    try:  # Linux answers EIO on a pty whose other end is closed and that holds nothing
        seen = os.read(parent, 4096) if select.select([parent], [], [], 0)[0] else b""
    except OSError:
        seen = b""
    os.close(parent)
    assert done.returncode == 2, done.stderr
    assert b"refusing to print a secret to a terminal" in done.stderr
    assert b"abc" not in seen + done.stderr
    revealed = subprocess.run([*cmd, "--reveal"], stdout=subprocess.PIPE, env=env, timeout=60,
                              check=True)
    assert revealed.stdout == pem


def test_value_is_never_taken_from_argv_and_bad_names_are_refused(tmp_path: Path) -> None:
    _, alice_pub = _key(tmp_path, "alice")
    inv = _inventory(tmp_path, {"alice": alice_pub})
    extra = _cli(["secrets", "set", "hf_token", "hf_value", "-i", str(inv)], stdin=b"x")
    assert extra.exit_code == 2  # no VALUE argument exists
    bad = _cli(["secrets", "set", "../x", "-i", str(inv)], stdin=b"x")
    assert bad.exit_code == 2 and "is not a secret name" in bad.output
    empty = _cli(["secrets", "set", "hf_token", "-i", str(inv)], stdin=b"\n")
    assert empty.exit_code == 2 and "empty" in empty.output
    assert "secrets" not in inv.read_text()


def test_a_service_may_name_its_secrets_before_they_are_set(tmp_path: Path) -> None:
    """The inventory is written service first, then `secrets set` for each secret: set
    does not refuse it for the secrets still to come; every other command does."""
    alice, alice_pub = _key(tmp_path, "alice")
    inv = _inventory(tmp_path, {"alice": alice_pub})
    inv.write_text(inv.read_text() + "hosts:\n  gpu1:\n    address: 10.0.0.5\n"
                   "    ssh_from: [10.0.0.0/8]\n    services:\n      trainer:\n"
                   "        port: 9000\n        command: /usr/bin/python3 -m http.server 9000\n"
                   "        secrets: {hf_token: HF_TOKEN, wandb_key: {file: wandb-key}}\n")
    early = _cli(["check", "-i", str(inv)])
    assert early.exit_code == 2 and "unknown secret 'hf_token'" in early.output
    for name in ("hf_token", "wandb_key"):
        r = _cli(["secrets", "set", name, "-i", str(inv)], stdin=VALUE + b"\n")
        assert r.exit_code == 0, r.output
    assert _cli(["check", "-i", str(inv)]).exit_code == 0
    assert _show(inv, alice).stdout_bytes == VALUE
