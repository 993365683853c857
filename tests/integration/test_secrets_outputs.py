"""Every output of the suite's secret fixtures, grepped for the plaintext (issue 37): the
rendered tree of `render --out` (every file), `render`/`check`/`secrets check`/`secrets
rekey` and the error paths of `plan` and `apply` (a key that does not decrypt, a value
with a newline for an environment variable), each as text and `--json`, stdout and
stderr. The operator's key (tests/fixtures/secrets/alice) is always at hand, so a
command that decrypted where it should not would have the value to print.

`plan` and `apply` on a real host, where the values are decrypted and delivered, are
grepped the same way in tests/lab/test_secrets.py. The error paths fail before any host
is connected to (the fixture's hosts are documentation addresses, never reached).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "secrets"
# the fixture's values (tests/fixtures/secrets/inventory.yml says so); what no output holds
PLAINTEXTS = (b"hf_FIXTURE_PLAINTEXT_1", b"sk-FIXTURE-PLAINTEXT-2")
NEWLINE_VALUE = b"hf_FIXTURE_FIRST_LINE_3\nhf_FIXTURE_SECOND_LINE_4"

pytestmark = pytest.mark.skipif(shutil.which("age") is None or shutil.which("ssh-keygen") is None,
                                reason="needs age and ssh-keygen")


def cli(*args: str, identity: Path, cwd: Path) -> tuple[int, bytes]:
    """`provision ARGS` as a user runs it: exit status, stdout and stderr together."""
    done = subprocess.run([sys.executable, "-m", "provision", *args], capture_output=True,
                          cwd=cwd, timeout=120, check=False, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "200",
                               "PROVISION_IDENTITY": str(identity)})
    return done.returncode, done.stdout + done.stderr


def clean(output: bytes, *extra: bytes) -> bool:
    """No plaintext in `output`, nor any line of one."""
    lines = [ln for v in (*PLAINTEXTS, *extra) for ln in v.split(b"\n")]
    return not any(v in output for v in (*PLAINTEXTS, *extra, *lines))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(FIXTURES / "inventory.yml", tmp_path / "inventory.yml")
    key = tmp_path / "alice"
    key.write_bytes((FIXTURES / "alice").read_bytes())
    key.chmod(0o600)
    return tmp_path


def test_the_grep_sees_a_plaintext_where_there_is_one(work: Path) -> None:
    """The check below can fail: `secrets show` prints the value (stdout not a terminal)."""
    code, out = cli("secrets", "show", "hf_token", "-i", "inventory.yml", identity=work / "alice",
                    cwd=work)
    assert code == 0 and not clean(out), out


def test_render_out_holds_no_value_anywhere_in_the_tree(work: Path) -> None:
    for extra in ((), ("--json",)):
        out_dir = work / f"out{len(extra)}"
        code, out = cli("render", "-i", "inventory.yml", "--out", str(out_dir), *extra,
                        identity=work / "alice", cwd=work)
        assert code == 0, out
        assert clean(out), out
        files = [p for p in out_dir.rglob("*") if p.is_file()]
        assert clean(b"".join(p.read_bytes() for p in files))
        # a placeholder where each secret's file goes, the unit names the path only
        creds = out_dir / "gpu1" / "etc" / "provision" / "credentials"
        assert b"never rendered" in (creds / "trainer" / "hf_token.env").read_bytes()
        assert b"never rendered" in (creds / "web" / "api_key.cred").read_bytes()
        unit = (out_dir / "gpu1" / "etc" / "systemd" / "system" / "provision-trainer.service")
        assert b"EnvironmentFile=/etc/provision/credentials/trainer/hf_token.env" in unit.read_bytes()


def test_check_and_the_secrets_commands_print_no_value(work: Path) -> None:
    for args in (("check",), ("check", "--json"), ("secrets", "check"), ("secrets", "rekey")):
        code, out = cli(*args, "-i", "inventory.yml", identity=work / "alice", cwd=work)
        assert code == 0, (args, out)
        assert clean(out), (args, out)


def test_a_key_that_does_not_decrypt_fails_naming_whom_the_secret_is_for(work: Path) -> None:
    other = work / "carol"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    for cmd in (("plan",), ("apply", "--yes")):
        for extra in ((), ("--json",)):
            code, out = cli(*cmd, "-i", "inventory.yml", *extra, identity=other, cwd=work)
            assert code == 1, (cmd, extra, out)
            assert b"does not decrypt with" in out and b"encrypted to: alice" in out, out
            assert clean(out), out


def test_a_value_with_a_newline_for_an_environment_variable_fails_before_any_host(
        work: Path) -> None:
    pub = (FIXTURES / "alice.pub").read_text().strip()
    armored = subprocess.run(["age", "--encrypt", "--armor", "-r", pub], input=NEWLINE_VALUE,
                             capture_output=True, check=True).stdout.decode()
    text = (work / "inventory.yml").read_text()
    head, _, _ = text.partition("secrets:\n  hf_token: |\n")
    rest = text.split("  api_key: |\n", 1)[1]
    block = "".join(f"    {ln}\n" for ln in armored.strip().split("\n"))
    (work / "inventory.yml").write_text(f"{head}secrets:\n  hf_token: |\n{block}  api_key: |\n{rest}")
    for cmd in (("plan",), ("apply", "--yes")):
        for extra in ((), ("--json",)):
            code, out = cli(*cmd, "-i", "inventory.yml", *extra, identity=work / "alice", cwd=work)
            assert code == 1, (cmd, extra, out)
            assert b"cannot be the environment variable HF_TOKEN" in out, out
            assert b"{file: hf_token}" in out, out
            assert clean(out, NEWLINE_VALUE), out
            assert b"gpu1" not in out, out  # refused before any host's run began
