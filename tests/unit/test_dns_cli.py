"""`provision dns plan` on bad DNS inventories: exit 2, file:line, before any network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main

BAD = Path(__file__).parent.parent / "fixtures" / "bad"
DNS_BAD = ["21-ttl-zero", "22-ttl-too-big", "23-cname-apex", "30-a-record-ipv6", "33-rfc2136-no-server",
           "41-ttl-above-int32", "42-a-record-not-ip", "43-zone-no-provider", "44-clouddns-no-project",
           "45-cname-with-values", "46-two-a-records-one-name", "47-cname-beside-a-in-list"]


@pytest.mark.parametrize("name", DNS_BAD)
def test_bad_dns_input_exits_2_with_file_and_line(name: str) -> None:
    path = BAD / f"{name}.yml"
    line = re.match(r"# expect: (\d+) ", path.read_text()).group(1)  # type: ignore[union-attr]
    r = CliRunner().invoke(main, ["dns", "plan", "-i", str(path)])
    assert r.exit_code == 2, r.output
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: dns\.zones\.", r.output), r.output
    assert "Traceback" not in r.output
