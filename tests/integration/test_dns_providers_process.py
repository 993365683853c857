"""The provider table loads only what an inventory names, seen from a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_only_the_providers_an_inventory_names_are_loaded(tmp_path: Path) -> None:
    """An inventory of Route53 and Cloud DNS zones loads neither boto3, google-cloud nor
    dnspython for `check` (the rfc2136 module imports dnspython at its top)."""
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\ndns:\n  zones:\n    example.org: {provider: route53}\n"
                   "    example.net: {provider: clouddns, project: my-project, managed_zone: n}\n")
    code = (f"import sys; sys.argv=['provision','check','-i',{str(inv)!r}]\n"
            "from provision.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('\\n'.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(out.split())
    assert {"provision.dns.providers.route53", "provision.dns.providers.clouddns"} <= loaded
    assert "provision.dns.providers.rfc2136" not in loaded
    assert not {m.split(".")[0] for m in loaded} & {"dns", "boto3", "botocore", "google"}
