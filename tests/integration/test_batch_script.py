"""The batch script the executor runs, run by a real sh on this machine: atomic writes, progress,
the stop at a failing action, nothing run when cut short, symlinks owned by a user."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from provision.steps import script
from provision.steps.actions import RemoveTemps, SetAttrs, WriteFile


def test_script_writes_atomically_and_reports_progress(root_dir: Path) -> None:
    """Run the generated batch locally with a real sh (owner = the current user)."""
    tmp_path = root_dir
    import grp
    import os
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    target = tmp_path / "sub" / "it's a file.conf"
    leftover = tmp_path / ".provision-tmp.old"
    leftover.write_text("half")
    acts = [RemoveTemps((str(leftover),)),
            WriteFile(str(target), "x = 'y'\n$HOME `id`\n", 0o600, me, group)]
    text = script.build(acts)
    out = subprocess.run(["sh", "-s"], input=text, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert script.parse_progress(out.stdout) == (1, True)
    assert target.read_text() == "x = 'y'\n$HOME `id`\n"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["it's a file.conf", "sub"]


def test_script_stops_at_the_failing_action(root_dir: Path) -> None:
    tmp_path = root_dir
    acts = [WriteFile(str(tmp_path / "ok"), "1\n", 0o644, "root", "root"),
            SetAttrs(str(tmp_path / "missing"), 0o600, "root", "root"),
            WriteFile(str(tmp_path / "never"), "2\n", 0o644, "root", "root")]
    out = subprocess.run(["sh", "-s"], input=script.build(acts), capture_output=True, text=True)
    assert out.returncode != 0
    assert script.parse_progress(out.stdout) == (1, False)
    assert not (tmp_path / "never").exists()


def test_truncated_script_runs_nothing(tmp_path: Path) -> None:
    text = script.build([WriteFile(str(tmp_path / "f"), "1\n", 0o644, "root", "root")])
    cut = text[: text.index("mv -fT")]
    out = subprocess.run(["sh", "-s"], input=cut, capture_output=True, text=True)
    assert out.returncode != 0 and list(tmp_path.iterdir()) == []


def test_writes_refuse_a_path_through_a_symlink_owned_by_a_user(root_dir: Path) -> None:
    """~/.ssh swapped for a link to a root directory must not make root write or chown there."""
    from provision.steps.actions import Mkdir, WriteFile

    target = root_dir / "etc-sudoers.d"
    target.mkdir()
    home = root_dir / "home" / "bob"
    home.mkdir(parents=True)
    (home / ".ssh").symlink_to(target)
    os.chown(home / ".ssh", 4242, 4242, follow_symlinks=False)
    for action, why in ((Mkdir(str(home / ".ssh"), 0o700, "root", "root"), ".ssh: it is a symlink"),
                        (WriteFile(str(home / ".ssh" / "authorized_keys"), "x\n"),
                         ".ssh belongs to uid 4242")):
        r = subprocess.run(["sh", "-s"], input=script.build([action]), capture_output=True, text=True)
        assert r.returncode != 0 and why in r.stderr, r.stderr
    assert list(target.iterdir()) == []
    # a symlink root owns is trusted (/home -> /data/home on many GPU servers)
    os.chown(home / ".ssh", 0, 0, follow_symlinks=False)
    r = subprocess.run(["sh", "-s"], input=script.build([WriteFile(str(home / ".ssh" / "k"), "x\n")]),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (target / "k").read_text() == "x\n"
