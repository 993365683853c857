"""Every commit-confirmed script (apply, rollback, confirm, status) of both kinds parses as
sh (`sh -n`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from provision.tasks import commit as C
from tests.unit.test_harden_commit import CID, fw, inv, sshd  # noqa: F401 (fixtures)


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
@pytest.mark.parametrize("kind", ["firewall", "sshd"])
def test_scripts_are_valid_sh(kind: str, request: pytest.FixtureRequest) -> None:
    action: C.CommitConfirmed = request.getfixturevalue("fw" if kind == "firewall" else "sshd")
    for text in (C.apply_script(action, CID, 30), C.rollback_script(action, CID),
                 C.confirm_script(action, CID), C.status_script(action, CID)):
        r = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
