"""Start-up: `provision check` must not import boto3, google-cloud, fabric or paramiko, and
no module imports inside a function unless start-up needs it and it is listed here, with
why. An import inside a function hides an import cycle as easily as it saves start-up
time: a new one fails `test_in_function_imports_are_listed` until it is listed (or moved
to the top of its module)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "inventories" / "example.yml"
FORBIDDEN = ("boto3", "botocore", "google", "fabric", "paramiko", "jinja2", "sshtunnel")

# (module file, module imported as written) -> why it is imported only when used
ALLOWED: dict[tuple[str, str], str] = {
    ("provision/commands/audit.py", "provision.cluster_plot"):
        "matplotlib (~0.5 s, an optional extra): only `audit --cluster --plot` draws",
    ("provision/cluster_plot.py", "matplotlib"):
        "an optional extra (provision[plot]): a clear error when it is missing",
    ("provision/cluster_plot.py", "matplotlib.pyplot"): "as matplotlib, after choosing Agg",
    ("provision/hosts/run_phases.py", "provision.acme"):
        "the ACME library, josepy and requests (~0.2 s): `apply` loads them only when a "
        "converged host has a door",
    ("provision/commands/audit.py", "provision.cloud"):
        "boto3 (~0.3 s): only when the attached security groups are read from AWS",
    ("provision/commands/check.py", "rich.table"):
        "rich (~0.1 s): `check` with no findings prints one line without it",
    ("provision/commands/check.py", "rich.text"): "rich: as rich.table",
    ("provision/commands/common.py", "rich.console"):
        "rich: every command imports common, `check` with no findings needs no console",
    ("provision/commands/common.py", "rich.segment"): "rich: as rich.console",
    ("provision/commands/check.py", "provision.dns.migrate.phases"):
        "the phase machine (~0.2 s): only when an open migration journal is on this machine",
    ("provision/commands/check.py", "provision.dns.migrate.guard"):
        "imports the phase machine: only when a finalized migration's record is on this machine",
    ("provision/commands/check.py", "provision.dns.offline"):
        "TSIG and credentials parsers: only when a zone names a key or credentials file",
    ("provision/ssh/hostkeys.py", "paramiko"):
        "paramiko (~0.3 s): the OpenSSH tunnel backend needs only known_hosts_path from here",
    ("provision/ssh/hostkeys.py", "paramiko.hostkeys"): "paramiko: as above",
    ("provision/dns/providers/route53.py", "boto3"):
        "boto3 (~0.4 s): `check` imports this provider when an inventory names route53 "
        "(for its settings and capabilities); boto3 only when the zone is read or written",
    ("provision/dns/providers/route53.py", "botocore.exceptions"): "boto3: as above",
    ("provision/dns/providers/clouddns.py", "google.auth"):
        "google-cloud-dns (~0.5 s): as route53's boto3, `check` imports this provider "
        "when an inventory names clouddns",
    ("provision/dns/providers/clouddns.py", "google.auth.credentials"):
        "google: as google.auth",
    ("provision/dns/providers/clouddns.py", "google.auth.exceptions"):
        "google: as google.auth",
    ("provision/dns/providers/clouddns.py", "google.oauth2"):
        "google: as google.auth",
    ("provision/dns/providers/clouddns.py", "google.api_core"):
        "google: as google.auth",
    ("provision/dns/providers/clouddns.py", "google.cloud"):
        "google: as google.auth",
    ("provision/dnsdata/rdata.py", ".presentation"):
        "dnspython (~0.1 s): only when a TXT, MX, SRV or CAA value is read; `check` of an "
        "inventory without one loads none",
    ("provision/dns/propagation.py", "dns.exception"):
        "dnspython (~0.15 s): only to ask the name servers; the phase machine, which "
        "`check` loads when a migration journal is open, needs only the Answer type",
    ("provision/dns/propagation.py", "dns.flags"):
        "dnspython: as dns.exception",
    ("provision/dns/propagation.py", "dns.message"):
        "dnspython: as dns.exception",
    ("provision/dns/propagation.py", "dns.name"):
        "dnspython: as dns.exception",
    ("provision/dns/propagation.py", "dns.query"):
        "dnspython: as dns.exception",
    ("provision/dns/propagation.py", "dns.rcode"):
        "dnspython: as dns.exception",
    ("provision/dns/propagation.py", "dns.rdatatype"):
        "dnspython: as dns.exception",
    ("provision/cloud/aws.py", "boto3"):
        "boto3 (~0.4 s): only once a client is made; `sg --help`, `import sg --help` and a "
        "bad inventory's exit 2 come before that",
    ("provision/cloud/aws.py", "botocore.config"): "boto3: as above",
    ("provision/cloud/aws.py", "botocore.exceptions"): "boto3: as above",
    ("provision/pytasks/load.py", "provision.steps.python_task"):
        "the task step and the facts it reads (~20 ms before a plan's first connection): "
        "only a playbook with Python tasks needs them",
    ("provision/pytasks/load.py", "."):
        "fabric and invoke (~0.15 s), for the `fabric.Connection` a Python task gets "
        "(`fabric`): only a playbook with Python tasks needs them; `load` imports it "
        "in the main thread, before the hosts' threads",
    ("provision/lab/pyindex.py", "packaging.requirements"):
        "packaging (~40 ms): only when `lab adopt` maps an inventory's declared Python "
        "environments onto the lab's index",
    ("provision/lab/pyindex.py", "packaging.specifiers"): "packaging: as above",
    ("provision/lab/pyindex.py", "packaging.utils"): "packaging: as above",
    ("provision/lab/pyindex.py", "packaging.tags"): "packaging: as above (`--wheels`' tags)",
    ("provision/lab/pyindex.py", "packaging.version"): "packaging: as above",
    ("provision/lab/pyindex.py", "email.parser"):
        "the email package (a wheel's METADATA): only when `lab adopt --wheels` reads one",
    ("provision/lab/pyindex.py", "email.policy"): "the email package: as above",
    ("provision/lab/pyindex_shell.py", "packaging.tags"):
        "packaging: only when `lab adopt` maps declared Python environments",
    ("provision/inventory/python_envs.py", "packaging.requirements"):
        "packaging (~40 ms, most of it compiling its requirement grammar): only when an "
        "inventory declares or uses a Python environment",
    ("provision/inventory/python_envs.py", "packaging.utils"): "packaging: as above",
    ("provision/dns/providers/rfc2136.py", ".rfc2136_client"):
        "dnspython's query, update and zone-transfer modules (~80 ms): the inventory loader "
        "imports this provider for its settings whenever a zone names rfc2136; the client "
        "only when the zone is read or written",
    ("provision/hosts/run.py", "."):
        "run_phases: the steps, their templates and Jinja, the facts (~0.3 s), imported "
        "while the first hosts' connections open (key exchanges and logins), not before",
    ("provision/commands/converge.py", "."):
        "converge_output: rich and the plan output, imported (by the hooks the engine asks "
        "for) while the first hosts' connections open, as run_phases is",
    ("provision/facts/__init__.py", "."):
        "the probe and, through its registry, every fact's module (~0.1 s): `plan` checks "
        "the playbook before it connects, and probes only once the connections are under way",
    ("provision/inventory/__init__.py", ".build"):
        "build and the schema's pydantic models: importing inventory.model for its types "
        "runs this __init__ (measured: the model alone ~0.3 s, with build ~0.6 s); the "
        "import cycle that also kept it here is gone (tests/unit/test_import_layers.py)",
}

def in_function_imports(root: Path) -> set[tuple[str, str]]:
    """(file relative to the repository, module as written) of every import statement
    inside a function or method of the package."""
    found: set[tuple[str, str]] = set()

    def walk(node: ast.AST, rel: str, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, ast.Import):
                found.update((rel, a.name) for a in child.names)
            elif inside and isinstance(child, ast.ImportFrom):
                found.add((rel, "." * child.level + (child.module or "")))
            walk(child, rel, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    for path in sorted((root / "provision").rglob("*.py")):
        walk(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(root).as_posix(), False)
    return found


def test_in_function_imports_are_listed() -> None:
    found = in_function_imports(ROOT)
    unlisted = sorted(found - ALLOWED.keys())
    assert not unlisted, ("imports inside functions: move them to the top of the module, or, "
                          f"when start-up needs them there, list them in ALLOWED with why: {unlisted}")
    stale = sorted(ALLOWED.keys() - found)
    assert not stale, f"listed in ALLOWED but imported at the top now: remove {stale}"


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    pkg = tmp_path / "provision"
    pkg.mkdir()
    (pkg / "m.py").write_text("import os\n\ndef f():\n    import json\n    from . import x\n\n"
                              "class C:\n    def g(self):\n        from a.b import c\n")
    assert in_function_imports(tmp_path) == {("provision/m.py", "json"), ("provision/m.py", "."),
                                             ("provision/m.py", "a.b")}


def test_check_imports_nothing_heavy() -> None:
    code = (f"import sys; sys.argv=['provision','check','-i',{str(EXAMPLE)!r}]\n"
            "from provision.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import pydantic.plugin._loader as L\n"
            "print('\\n'.join(sorted(sys.modules)))\n"
            "print('plugins-scanned' if L._plugins is not None else '')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {m.split(".")[0] for m in out.split()}
    assert "provision" in loaded  # the probe really ran the command
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    # pydantic's plugin discovery (an entry-point scan of every distribution, ~30 ms) is off
    # in the CLI (PYDANTIC_DISABLE_PLUGINS, provision/cli.py)
    assert "plugins-scanned" not in out.split()


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_plan_apply_exec_audit_and_the_tunnel_import_neither_fabric_nor_invoke() -> None:
    """Fabric and invoke (~0.15 s: invoke imports unittest.mock and asyncio) are for the
    fleet API and Python tasks only; every hop is a paramiko-only `provision.ssh.link.Link`,
    and paramiko's own `import invoke` (for `Match exec`) is deferred
    (provision/ssh/invoke_deferred.py). Each path in a fresh interpreter: the first import
    of paramiko comes from a different module in each."""
    for modules in (["provision.commands.converge", "provision.commands.converge_output",
                     "provision.hosts.run_phases"],
                    ["provision.commands.exec"],
                    ["provision.commands.audit"], ["provision.hosts.gather"],
                    ["provision.commands.tunnel", "provision.tunnel.paramiko_backend"]):
        loaded = _modules_after("\n".join(f"import {m}" for m in modules))
        assert "paramiko.transport" in loaded, modules  # the probe really loaded the SSH stack
        heavy = sorted(m for m in loaded if m.split(".")[0] in ("fabric", "invoke"))
        assert not heavy, (modules, heavy)


def test_paramikos_match_exec_still_runs_invoke_and_fabric_gets_the_real_one() -> None:
    """The deferred invoke is a stand-in bound in paramiko.config only: `Match exec` imports
    the real invoke on first use; Fabric (the fleet API) imports it as usual, before or after."""
    config = ("'Match exec \"exit 0\"\\n  User yes\\nMatch exec \"exit 1\"\\n  Port 2222\\n'")
    for first in ("import provision.commands.converge", "import provision.fleet"):
        loaded = _modules_after(
            f"{first}\nimport paramiko, fabric, invoke\n"
            f"got = paramiko.SSHConfig.from_text({config}).lookup('h')\n"
            "assert got == {'hostname': 'h', 'user': 'yes'}, got\n"
            "assert fabric.Connection and invoke.run is paramiko.config.invoke.run\n"
            "assert type(invoke) is type(paramiko)  # a real module, not the stand-in")
        assert "invoke.runners" in loaded, first
