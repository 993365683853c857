"""Hostile journals, markers and provider answers (tests/fixtures/hostile_dns/): each is
refused with a message naming the file or TXT record, exit status as its header says, no
traceback, no raw escape reaching the output, and nothing sent (no change POSTed to the
Cloud DNS fake on 127.0.0.1, read back from what the fake received)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.dns.migrate import journal
from tests.support.clouddns_fake import FakeCloudDns, isolated_fake

CORPUS = sorted(p for p in (Path(__file__).parents[1] / "fixtures" / "hostile_dns").iterdir()
                if p.name != "README.md")
PROJECT, MZ, ZONE = "lab-project", "example-org", "example.org."
RECORDS = {"api": {"type": "A", "values": ["192.0.2.1"], "ttl": 300},
           "www": {"type": "CNAME", "value": "api.example.org", "ttl": 300}}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudDns]:
    with isolated_fake(monkeypatch, PROJECT, MZ, ZONE, page_size=50, pending_polls=0) as f:
        f.set_rrset(PROJECT, MZ, "api.example.org.", "A", 300, ["192.0.2.1"])
        f.set_rrset(PROJECT, MZ, "www.example.org.", "CNAME", 300, ["api.example.org."])
        yield f


def _case(path: Path) -> tuple[dict[str, list[str]], bytes]:
    raw = path.read_bytes()
    headers: dict[str, list[str]] = {}
    lines = raw.split(b"\n")
    i = 0
    while i < len(lines) and lines[i].startswith(b"# "):
        key, _, value = lines[i][2:].decode().partition(": ")
        headers.setdefault(key, []).append(value)
        i += 1
    assert "expect" in headers and "run" in headers, f"{path.name}: needs # expect: and # run:"
    return headers, b"\n".join(lines[i:])


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 35


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_hostile_dns_input_is_refused_and_nothing_is_sent(
        path: Path, fake: FakeCloudDns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    headers, body = _case(path)
    state = tmp_path / "state"
    migrations = state / "migrations"
    migrations.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    special = headers.get("special", [""])[0]
    for name in headers.get("journal", []):
        target = migrations / journal.file_name(name)
        if special == "fifo":
            os.mkfifo(target)
        elif special == "symlink":
            elsewhere = tmp_path / "elsewhere.json"
            elsewhere.write_text("{}")
            target.symlink_to(elsewhere)
        elif special == "big":
            target.write_bytes(b" " * (300 * 1024) + b"{}")
        else:
            target.write_bytes(body)
    for text in headers.get("journal-json", []):
        j = json.loads(text)
        (migrations / journal.file_name(j["name"])).write_text(text)
    strings = [s for s in body.decode("utf-8", "replace").split("\n") if s]
    for name in headers.get("marker", []):
        fake.set_rrset(PROJECT, MZ, f"_provision-migration.{name}", "TXT", 60, strings)
    for name in headers.get("txt", []):
        fake.set_rrset(PROJECT, MZ, name, "TXT", 300, strings)
    rrsets: dict[tuple[str, str], dict[str, Any]] = fake.rrsets(PROJECT, MZ)
    for text in headers.get("rrset", []):
        rr = json.loads(text)
        rrsets[(rr["name"], rr["type"])] = {"kind": "dns#resourceRecordSet", **rr}
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": PROJECT, "managed_zone": MZ, "endpoint": fake.url,
        "records": RECORDS}}}}))

    result = CliRunner().invoke(main, [*headers["run"][0].split(), "-i", str(inv)])
    out = result.output
    status, _, pattern = headers["expect"][0].partition(" ")
    assert result.exit_code == int(status), out
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert "Traceback" not in out
    flat = " ".join(out.split())  # a terminal table wraps long lines
    assert re.search(pattern.replace("{state}", re.escape(str(migrations))), flat), out
    for c in ("\x1b", "\x07", "\u202e", "\u200b"):
        assert c not in out, f"raw {c!r} reached the output"
    posts = [p for m, p in fake.requests if m == "POST"]
    assert not posts, f"a change was sent: {posts} {fake.bodies}"
