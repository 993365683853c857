"""What the project says about itself is true (issue 39's small untruths): the example
inventory's editor schema is there and current, every `--help` shows what it means (no
`%%`: click does not %-format help), `dns check --type` offers every type provision writes,
and the DNS docs say which types `import dns` writes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from provision.cli import main
from provision.dns.adopt import FORMS
from provision.dnsdata.rdata import MANAGED_TYPES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "example.yml"


def test_the_example_inventorys_schema_resolves_and_is_current() -> None:
    [target] = re.findall(r"^# yaml-language-server: \$schema=(\S+)$",
                          EXAMPLE.read_text(encoding="utf-8"), flags=re.M)
    schema = (EXAMPLE.parent / target).resolve()
    assert schema.is_file(), f"{EXAMPLE.name} names {target}, which is not there"
    r = CliRunner().invoke(main, ["schema"])
    assert r.exit_code == 0, r.output
    assert schema.read_text(encoding="utf-8") == r.stdout, (
        f"{schema.relative_to(ROOT)} is stale (the inventory's schema changed): run `make schema`")
    assert json.loads(r.stdout)["$schema"].startswith("https://json-schema.org/")


def _commands() -> Iterator[list[str]]:
    """Every command path under `provision`, groups included."""
    def walk(cmd: click.Command, path: list[str], ctx: click.Context) -> Iterator[list[str]]:
        yield path
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, [*path, name], click.Context(sub, info_name=name, parent=ctx))
    yield from walk(main, [], click.Context(main, info_name="provision"))


def test_every_help_renders_without_a_stray_percent() -> None:
    paths = list(_commands())
    assert ["dns", "plan"] in paths and ["sg", "apply"] in paths and len(paths) > 30
    for path in paths:
        r = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
        assert r.exit_code == 0, (path, r.output)
        assert "%%" not in r.output, (path, r.output)
    r = CliRunner().invoke(main, ["dns", "plan", "--help"], terminal_width=200)
    assert "(30 % guard)" in r.output


def test_dns_check_offers_every_type_provision_writes() -> None:
    r = CliRunner().invoke(main, ["dns", "check", "--help"], terminal_width=200)
    offered = re.search(r"--type \[([^\]]+)\]", r.output)
    assert offered is not None, r.output
    types = set(offered.group(1).upper().split("|"))  # click shows the choices lower-cased
    assert set(MANAGED_TYPES) <= types and {"SRV", "CAA"} <= types, r.output


def test_the_docs_name_every_type_import_dns_writes() -> None:
    text = (ROOT / "docs" / "dns-records.md").read_text(encoding="utf-8")
    [written] = re.findall(r"^- Written: the types provision manages \(([^;]+);", text, flags=re.M)
    assert [t.strip() for t in written.split(",")] == list(FORMS) == list(MANAGED_TYPES)
