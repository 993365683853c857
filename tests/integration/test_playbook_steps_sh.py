"""Tests moved from tests/unit/test_playbook_steps.py that run a real process (tests/unit stays pure)."""

from __future__ import annotations

import pytest

from provision.playbook import parse
from provision.steps.command import ShellSpec


def test_every_guard_of_a_playbook_fits_the_probes_one_command_line() -> None:
    """What the cap is for: the probe's guards reach the host as ONE argument of `sh -c`
    (sshd runs the command line so), and Linux refuses one above 128 KiB. Guards at the
    cap still run through a real sh; the same guards over it cannot."""
    import shlex
    import subprocess

    from provision.playbook import MAX_GUARDS_TOTAL
    from provision.steps.command import guard_id

    unless = "true #" + "y" * 15_990
    steps = ", ".join(f"{{run: ls, name: s{n}, unless: '{unless}'}}" for n in range(4))
    pb = parse(f"hosts: all\nsteps: [{steps}]\n", "x.yml")
    args = [f"G:{guard_id('u', '', s.unless)}:u::{s.unless}" for s in pb.custom.values()
            if isinstance(s, ShellSpec) and s.unless]
    line = " ".join(shlex.quote(a) for a in ["sudo", "-n", "--", "sh", "-s", "--", *args])
    assert subprocess.run(["sh", "-c", f": {line}"], check=False).returncode == 0
    over = line + " " + shlex.quote("z" * (2 * MAX_GUARDS_TOTAL))
    with pytest.raises(OSError, match="Argument list too long"):
        subprocess.run(["sh", "-c", f": {over}"], check=False)
