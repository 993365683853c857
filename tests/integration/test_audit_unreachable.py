"""provision audit against a host whose sshd does not answer (a closed port on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner


def test_unreachable_host_fails_the_audit(tmp_path: Path) -> None:
    """A host whose sshd does not answer (a closed port on 127.0.0.1): exit 1, said per host."""
    import socket

    import yaml

    from provision.cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = {"version": 1, "defaults": {"user": "admin", "known_hosts": str(tmp_path / "known_hosts")},
           "hosts": {"gpu9": {"address": "127.0.0.1", "port": port, "ssh_from": ["10.0.0.0/8"]}}}
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(main, ["audit", "-i", str(inv), "--json"])
    assert r.exit_code == 1, r.output
    (h,) = json.loads(r.output)["hosts"]
    assert h["status"] == "unreachable" and "cannot connect" in h["error"]
    r = CliRunner().invoke(main, ["audit", "-i", str(inv)])
    assert r.exit_code == 1 and "gpu9: unreachable" in r.output
