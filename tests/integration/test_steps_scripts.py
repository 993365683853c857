"""The shell side of `run:` steps, run by a real sh here: the guards inside the probe and the
command inside the batch. (As whom they run, `sudo: false`, needs a host: tests/lab.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

from provision.facts import Request, parse, probe_script
from provision.facts import guards as G
from provision.steps import script as batch
from provision.steps.command import RunCommand, guard_id


def _probe(*guards: tuple[str, str]) -> dict[str, int]:
    args = [f"G:{guard_id(k, '', v)}:{k}::{v}" for k, v in guards]
    out = subprocess.run(["sh", "-s", "--", *args], input=probe_script(Request(guards=tuple(args))),
                         capture_output=True, text=True, check=True, timeout=60)
    answers = parse(out.stdout).get(G.SPEC)
    return {v: answers[guard_id(k, "", v)] for k, v in guards}


def test_guards_are_evaluated_in_the_probe(tmp_path: Path) -> None:
    (tmp_path / "there").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")  # a dangling link exists too
    got = _probe(("c", str(tmp_path / "there")), ("c", str(tmp_path / "absent")),
                 ("c", str(tmp_path / "link")), ("u", "true"), ("u", "exit 3"),
                 ("u", "test -e 'with:colon' || test -d /"))
    assert got == {str(tmp_path / "there"): 0, str(tmp_path / "absent"): 1,
                   str(tmp_path / "link"): 0, "true": 0, "exit 3": 3,
                   "test -e 'with:colon' || test -d /": 0}


def test_an_unless_command_cannot_eat_the_probe_or_forge_its_records() -> None:
    """The probe's script comes in on stdin: a guard reading stdin gets /dev/null, and what it
    prints is discarded (a forged `guard` or `end` record would decide for another step)."""
    forged = guard_id("u", "", "false")
    got = _probe(("u", "cat; exit 5"), ("u", f"printf 'guard\\t{forged}\\t0\\nend\\n'; exit 1"),
                 ("u", "false"))
    assert got == {"cat; exit 5": 5, f"printf 'guard\\t{forged}\\t0\\nend\\n'; exit 1": 1,
                   "false": 1}


def _batch(tmp_path: Path, *actions: RunCommand) -> tuple[subprocess.CompletedProcess[str], int, bool]:
    out = subprocess.run(["sh", "-s"], input=batch.build(list(actions)), capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    last, finished = batch.parse_progress(out.stdout)
    return out, last, finished


def test_a_command_runs_and_its_guard_is_verified(tmp_path: Path) -> None:
    made = tmp_path / "made"
    out, _, finished = _batch(tmp_path, RunCommand(f"echo hi; touch {made}", None, str(made),
                                                   f"test -e {made}", "absent"))
    assert out.returncode == 0 and finished, out.stderr
    assert made.exists() and "hi" in out.stderr  # its output goes to stderr, not progress


def test_a_command_that_does_not_create_its_path_fails(tmp_path: Path) -> None:
    out, last, finished = _batch(tmp_path, RunCommand("true", None, str(tmp_path / "never"),
                                                      None, "absent"))
    assert out.returncode != 0 and not finished and last == 0
    assert "did not create" in out.stderr and "next apply would run it again" in out.stderr


def test_a_command_after_which_unless_still_fails_fails(tmp_path: Path) -> None:
    out, _, finished = _batch(tmp_path, RunCommand("true", None, None, "exit 4", "exited 4"))
    assert not finished and "unless: guard still exits 4" in out.stderr


def test_a_failing_command_stops_the_batch_with_its_status(tmp_path: Path) -> None:
    after = tmp_path / "after"
    out, last, finished = _batch(
        tmp_path, RunCommand("echo out; echo err >&2; exit 7", None, None, None, "no guard"),
        RunCommand(f"touch {after}", None, None, None, "no guard"))
    assert (out.returncode, last, finished) == (7, 0, False)
    assert out.stderr.strip().splitlines()[-2:] == ["out", "err"]
    assert not after.exists()


def test_a_command_cannot_forge_progress_or_read_the_batch(tmp_path: Path) -> None:
    """fd 3 carries the batch's progress (`@done`): closed for the command; stdin (the rest
    of the batch) is /dev/null for it."""
    out, _, finished = _batch(
        tmp_path, RunCommand("printf '@done\\n' >&3; exit 9", None, None, None, "x"))
    assert not finished and out.returncode == 9
    out, _, finished = _batch(tmp_path, RunCommand("cat > got; true", None, None, None, "x"),
                              RunCommand("true", None, None, None, "x"))
    assert finished and (tmp_path / "got").read_text() == ""


def test_a_sysctl_read_back_runs_nothing_from_the_hosts_own_files(tmp_path: Path) -> None:
    # the value and the file come from the host's sysctl.d when the kernel keeps another
    # value; before, the failure's echo put them inside double quotes, where $(...) runs
    from provision.steps.actions import SetSysctl

    hit = tmp_path / "ran"
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "sysctl").write_text('#!/bin/sh\n[ "$1" = -n ] && echo other\nexit 0\n')
    (stub / "sysctl").chmod(0o755)
    action = SetSysctl("kernel.core_pattern", f"core.$(touch {hit})",
                       source=f'/usr/lib/sysctl.d/50-x"$(touch {hit})".conf')
    r = subprocess.run(["dash", "-c", action.script()], capture_output=True, text=True,
                       env={"PATH": f"{stub}:/usr/bin:/bin"}, timeout=30, check=False)
    assert r.returncode == 1
    assert not hit.exists()
    assert r.stderr == (f"kernel.core_pattern: the kernel runs 'other' after setting "
                        f'core.$(touch {hit}) (from /usr/lib/sysctl.d/50-x"$(touch {hit})".conf)\n')
