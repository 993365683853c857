"""The sshd_config reader and the sshd fragments against the real programs here: the reader
agrees with `sshd -T` on every fixture tree, the probe fragments run in sh and parse, an
Include matching no file is no Match block, a probe stopped at the file cap assumes one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.facts import parse
from provision.facts import sshd_config as SC
from provision.facts.sshd_effective import SPEC as EFF
from tests.unit.test_sshd_effect import D, load

# --- the reader -------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("sshd", path="/usr/sbin:/usr/bin"),
                    reason="needs root and sshd (sshd -T loads the host keys)")
@pytest.mark.parametrize("case", ["cloud-image", "match", "above-include", "no-include",
                                  "hidden-check"])
def test_the_reader_agrees_with_sshd_itself(case: str, tmp_path: Path) -> None:
    cfg = load(case)
    for path, text in cfg.files.items():
        q = tmp_path / path.removeprefix("/etc/ssh/")
        q.parent.mkdir(parents=True, exist_ok=True)
        q.write_text(text.replace(f"{D}/", f"{tmp_path}/sshd_config.d/"))
    keys = ("passwordauthentication", "kbdinteractiveauthentication", "permitemptypasswords",
            "authenticationmethods", "maxauthtries")
    for conn in (None, SC.Conn("alice", "10.1.2.3"), SC.Conn("bob", "10.1.2.3"),
                 SC.Conn("carol", "10.9.1.1")):
        cmd = ["/usr/sbin/sshd", "-T", "-f", str(tmp_path / "sshd_config")]
        out = subprocess.run(cmd + (["-C", conn.spec()] if conn else []), capture_output=True,
                             text=True, check=True).stdout
        real = dict(ln.split(" ", 1) for ln in out.splitlines() if " " in ln)
        for key in keys:
            w = SC.winner(cfg, key, conn)
            if w is not None:
                assert SC.normal(key, w.value) == real[key].lower(), (case, conn, key, w)
        if case == "cloud-image":  # the dot file and the .bak file are not read by sshd either
            assert (real["permitemptypasswords"], real["permitrootlogin"]) == ("no", "without-password")


# --- socket activation ------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/etc/ssh/sshd_config")
                    or not os.path.exists("/usr/sbin/sshd"), reason="needs root and sshd")
def test_the_fragments_run_here_and_parse() -> None:
    from provision.facts import Request, probe_script

    req = Request(facts=("sshd_config", "sshd_effective"), sshd_users=("root",))
    out = subprocess.run(["sh", "-s", "--", *req.args()], input=probe_script(req),
                         capture_output=True, text=True, check=True).stdout
    f = parse(out)
    cfg, eff = f.get(SC.SPEC), f.get(EFF)
    assert "/etc/ssh/sshd_config" in cfg.files and eff.status == 0 and eff.get("port")
    matches = any(ln.strip().lower().startswith("match") for t in cfg.files.values()
                  for ln in t.splitlines())
    assert eff.uniform is not matches  # per-user runs only where a Match block exists
    assert eff.users["root"].get("port") == eff.get("port")


# --- the probe's Match detection, run here against a temp /etc/ssh ----------------------------

def _probe_match(etc: Path) -> str:
    """PROBE_SSHD_MATCH as fact_sshd_config leaves it, with /etc/ssh moved to `etc`."""
    frag = (Path(__file__).parents[2] / "templates" / "facts" / "sshd_config.sh").read_text()
    script = (frag.replace("/etc/ssh", str(etc)) + "\nT=$(printf '\\t')\n"
              "fact_sshd_config >/dev/null\necho \"$PROBE_SSHD_MATCH\"\n")
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_an_include_that_matches_no_file_is_not_a_match_block(tmp_path: Path) -> None:
    """An empty sshd_config.d (a stock Debian host) is not "stopped at the file cap": sshd
    reads no file we did not send, so no per-user sshd -T is needed. Was: Match assumed."""
    (tmp_path / "sshd_config.d").mkdir()
    (tmp_path / "sshd_config").write_text(f"Include {tmp_path}/sshd_config.d/*.conf\nPort 22\n")
    assert _probe_match(tmp_path) == "no"
    (tmp_path / "sshd_config.d" / "50-a.conf").write_text("PasswordAuthentication no\n")
    assert _probe_match(tmp_path) == "no"
    (tmp_path / "sshd_config.d" / "60-b.conf").write_text("Match User alice\n  X y\n")
    assert _probe_match(tmp_path) == "yes"


def test_a_probe_stopped_at_the_file_cap_with_includes_left_assumes_a_match_block(
        tmp_path: Path) -> None:
    d = tmp_path / "sshd_config.d"
    d.mkdir()
    (tmp_path / "more").mkdir()
    (tmp_path / "sshd_config").write_text(f"Include {d}/*.conf\n")
    for i in range(64):
        (d / f"{i:02d}.conf").write_text(f"Include {tmp_path}/more/*.conf\n" if i == 63 else "")
    (tmp_path / "more" / "x.conf").write_text("Port 22\n")  # never read: past the cap
    assert _probe_match(tmp_path) == "yes"
