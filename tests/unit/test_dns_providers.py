"""The provider seam: one table, each module complete, nothing outside provision/dns
naming a provider, the schema describing each provider's fields."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from provision.cli import main
from provision.dnsdata import providers
from provision.dnsdata.provider_settings import Capabilities, ProviderSettings

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", sorted(providers.PROVIDERS))
def test_every_registered_module_is_a_whole_provider(name: str) -> None:
    mod = providers.load(name)
    assert issubclass(mod.Settings, ProviderSettings)
    assert isinstance(mod.CAPABILITIES, Capabilities)
    assert {"A", "AAAA", "CNAME", "TXT"} <= mod.CAPABILITIES.record_types  # records + markers
    assert not mod.CAPABILITIES.root_ns   # provision never manages the apex NS set
    assert mod.CAPABILITIES.nameservers   # said in docs/dns-providers.md
    for field in mod.Settings.local_files:
        assert field in mod.Settings.model_fields


def _naming(rel: str, text: str) -> list[str]:
    """Where `text` (the file `rel`) names a provider other than its own: a string literal
    equal to a provider's name (a branch on it, or a second table), or an import of a
    provider's module (a call past the seam)."""
    # a provider's own files: its module, and modules beside it named after it
    # (rfc2136_client.py: the dnspython client its module imports only when used)
    own = {mod.replace(".", "/") + suffix: name for name, mod in providers.PROVIDERS.items()
           for suffix in (".py", "_client.py")}
    modules = {mod: name for name, mod in providers.PROVIDERS.items()}
    found = []
    for node in ast.walk(ast.parse(text)):
        named: list[str] = []
        if isinstance(node, ast.Constant) and node.value in providers.PROVIDERS:
            named = [node.value]
        elif isinstance(node, ast.Import):
            named = [modules[a.name] for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            package = node.module or ""
            if node.level:  # relative: only provision/dns/ can reach a provider this way
                package = ".".join(rel.removesuffix(".py").split("/")[:-node.level]
                                   + ([package] if package else []))
            named = [modules[m] for m in (package, *(f"{package}.{a.name}" for a in node.names))
                     if m in modules]
        found += [f"{rel}:{getattr(node, 'lineno', 0)}: {n!r}" for n in named if own.get(rel) != n]
    return found


def test_the_provider_check_finds_a_branch_and_an_import() -> None:
    """The guard below can fail: each way of naming a provider past the seam is found."""
    assert _naming("provision/commands/dns.py", "if kind == 'route53':\n    pass\n")
    assert _naming("provision/commands/dns.py", "from provision.dns.providers import powerdns\n")
    assert _naming("provision/commands/dns.py", "import provision.dns.providers.clouddns\n")
    assert _naming("provision/dns/providers/zone.py", "from .rfc2136 import Settings\n")
    assert _naming("provision/dns/providers/zone.py", "from . import route53\n")
    assert _naming("provision/dns/zone.py", "from .providers import route53\n")
    assert not _naming("provision/dns/providers/powerdns.py", "KIND = 'powerdns'\n")
    assert not _naming("provision/dns/providers/rfc2136_client.py", "from .rfc2136 import read_tsig_key\n")
    assert _naming("provision/dns/providers/rfc2136_client.py", "from .route53 import Settings\n")
    assert not _naming("provision/dns/zone.py", "from .records import rrset\n")


def test_no_code_but_the_table_and_the_module_itself_names_a_provider() -> None:
    """A string literal equal to a provider's name is a branch on it, or a second table;
    an import of a provider's module is a call past the seam (the lab's generated
    inventory, which uses rfc2136 as data, is the exception)."""
    found = []
    for path in sorted((ROOT / "provision").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("provision/dnsdata/providers.py", "provision/lab/plan.py"):
            continue
        text = path.read_text()
        if any(n in text for n in providers.PROVIDERS):
            found += _naming(rel, text)
    assert not found, found


def test_the_schema_describes_each_providers_fields() -> None:
    r = CliRunner().invoke(main, ["schema"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.output)
    defs = schema["$defs"]
    zones = defs["DnsDoc"]["properties"]["zones"]["additionalProperties"]["oneOf"]
    by_provider = {}
    for ref in zones:
        d = defs[ref["$ref"].rsplit("/", 1)[-1]]
        by_provider[d["properties"]["provider"]["const"]] = set(d["properties"])
    assert set(by_provider) == set(providers.PROVIDERS)
    for name, fields in by_provider.items():
        own = set(providers.settings_model(name).model_fields)
        assert own <= fields and {"records", "cutover_above_ttl"} <= fields, name
        others = set().union(*(providers.settings_model(n).model_fields
                               for n in providers.PROVIDERS if n != name)) - own
        assert not fields & others, (name, fields & others)  # no other provider's field


def test_an_unknown_provider_is_refused_naming_every_known_one(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\ndns:\n  zones:\n    example.org: {provider: cloudflare}\n")
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code == 2
    assert f"{inv}:4:19: dns.zones.example.org.provider" in r.output
    assert all(f"'{n}'" in r.output for n in providers.PROVIDERS), r.output


def test_a_providers_field_in_another_providers_zone_is_an_unknown_key(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\ndns:\n  zones:\n    example.org:\n      provider: route53\n"
                   "      tsig_key_file: k\n")
    r = CliRunner().invoke(main, ["check", "-i", str(inv)])
    assert r.exit_code == 2
    assert f"{inv}:6:7: dns.zones.example.org.tsig_key_file: unknown key" in r.output
    assert "hosted_zone_id" in r.output and "server" not in r.output
