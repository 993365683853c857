"""`provision check` must not import boto3, google-cloud, fabric or paramiko (start-up time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "inventories" / "example.yml"
FORBIDDEN = ("boto3", "botocore", "google", "fabric", "paramiko", "jinja2", "sshtunnel")


def test_check_imports_nothing_heavy() -> None:
    code = (f"import sys; sys.argv=['provision','check','-i',{str(EXAMPLE)!r}]\n"
            "from provision.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('\\n'.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {m.split(".")[0] for m in out.split()}
    assert "provision" in loaded  # the probe really ran the command
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
