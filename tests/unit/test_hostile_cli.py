"""Hostile and mistaken input through the real CLI, beyond the bad-inventory and hostile-DNS
corpora: provider files the inventory names (TSIG keys, Cloud DNS credentials), names on
the command line, files given to -i / --playbook / --out. Each must end in a clear
message, exit 2, no traceback, nothing sent (offline: every inventory here points at
127.0.0.1 or at nothing)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from provision.cli import main
from provision.dnsdata import names

_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _refused(r: Result, *needles: str) -> None:
    """Exit 2, a message, no traceback, no raw control byte."""
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert not _RAW.search(r.output), repr(r.output)
    for n in needles:
        assert n in r.output, r.output


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no Application Default Credentials, no metadata server: nothing can reach Google
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))


def _rfc2136(tmp_path: Path, key: str) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "rfc2136", "server": "127.0.0.1", "port": 9, "tsig_key_file": key,
        "records": {"api": {"type": "A", "values": ["192.0.2.1"], "ttl": 300}}}}}},
        sort_keys=False))
    return p


# --- TSIG key files: what is wrong, in words ------------------------------------------

@pytest.mark.parametrize("body,why", [
    ('key "k" {\n algorithm hmac-sha256;\n secret "!!!notbase64";\n};\n', "not base64"),
    ('key "a" { algorithm hmac-sha256; secret "c2VjcmV0"; };\n'
     'key "b" { algorithm hmac-sha256; secret "c2VjcmV0"; };\n', "more than one key block"),
], ids=["secret-not-base64", "two-key-blocks"])
def test_a_tsig_key_file_says_what_is_wrong(tmp_path: Path, body: str, why: str) -> None:
    (tmp_path / "k.key").write_text(body)
    inv = _rfc2136(tmp_path, "k.key")
    _refused(_cli("check", "-i", str(inv)), f"{inv}:8:", "tsig_key_file", why)
    _refused(_cli("dns", "plan", "-i", str(inv)), why)


# --- Cloud DNS credentials files: a service-account key, checked offline ----------------

def _clouddns(tmp_path: Path, creds: str) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "clouddns", "project": "lab-project", "managed_zone": "example-org",
        "credentials_file": creds,
        "records": {"api": {"type": "A", "values": ["192.0.2.1"], "ttl": 300}}}}}},
        sort_keys=False))
    return p


_SA = {"type": "service_account", "client_email": "a@lab-project.iam.gserviceaccount.com",
       "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
       "token_uri": "https://oauth2.googleapis.com/token"}


@pytest.mark.parametrize("content,why", [
    (b"{}", "the type is missing"),
    (json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "y",
                 "refresh_token": "z"}).encode(), "the type is 'authorized_user'"),
    (json.dumps({"type": "service_account"}).encode(), "missing or not text: client_email"),
    (json.dumps({**_SA, "token_uri": 5}).encode(), "missing or not text: token_uri"),
    (json.dumps(_SA).encode("utf-16"), "not a JSON service-account key"),
], ids=["empty-object", "user-credentials", "fields-missing", "token-uri-number", "utf-16"])
def test_a_credentials_file_that_is_no_service_account_key_is_bad_input(
        tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "sa.json").write_bytes(content)
    inv = _clouddns(tmp_path, "sa.json")
    _refused(_cli("check", "-i", str(inv)), f"{inv}:8:", "credentials_file", why)
    # before: google-auth's own message, exit 1 as if the API had failed
    r = _cli("dns", "plan", "-i", str(inv))
    _refused(r)
    assert "sa.json" in r.output


def test_a_private_key_google_auth_cannot_read_is_bad_input_not_an_api_failure(
        tmp_path: Path) -> None:
    (tmp_path / "sa.json").write_text(json.dumps(_SA))
    _refused(_cli("dns", "plan", "-i", str(_clouddns(tmp_path, "sa.json"))),
             "cannot use credentials_file")


# --- NAME on the command line: one reading for `dns check` and `dns migrate` -----------

@pytest.mark.parametrize("name,why", [
    ("", "it is empty"),
    ("api.example.org..", "an empty label"),
    (".api", "an empty label"),
    (".", "the root is not a record name"),
    ("api.example.net", "in none of the inventory's zones"),
    ("a\u200bb", "invisible"),
    ("a" * 64, "a label of 64 octets"),
], ids=["empty", "double-dot", "leading-dot", "root", "other-zone", "zero-width", "label-64"])
@pytest.mark.parametrize("command", [["dns", "migrate", "status"], ["dns", "check"]],
                         ids=["status", "check"])
def test_a_name_that_is_no_record_name_here_is_exit_2_with_the_reason(
        tmp_path: Path, command: list[str], name: str, why: str) -> None:
    inv = _rfc2136(tmp_path, "tsig.key")
    # before: `status ''` listed every migration (exit 0), `status api.example.org..` said
    # "in none of the zones", `check api.example.net` asked for api.example.net.example.org
    _refused(_cli(*command, name, "-i", str(inv)), why)


TWO = ["example.org", "sub.example.org"]


@pytest.mark.parametrize("name,zones,fq", [
    ("api", TWO[:1], ("example.org", "api.example.org.")),
    ("@", TWO[:1], ("example.org", "example.org.")),
    ("*", TWO[:1], ("example.org", "*.example.org.")),
    ("API.Example.ORG.", TWO, ("example.org", "api.example.org.")),
    ("api.example.org", TWO, ("example.org", "api.example.org.")),
    ("x.sub.example.org", TWO, ("sub.example.org", "x.sub.example.org.")),
])
def test_cli_names_are_read_one_way(name: str, zones: list[str], fq: tuple[str, str]) -> None:
    assert names.cli_name(name, zones) == fq


def test_the_apex_needs_a_zone_when_there_are_several() -> None:
    with pytest.raises(names.BadName, match="apex of which zone"):
        names.cli_name("@", ["example.org", "example.net"])


# --- -i: what the inventory path can be ------------------------------------------------


def test_a_directory_inventory_does_not_silently_leave_out_a_file_it_cannot_read(
        tmp_path: Path) -> None:
    import os

    (tmp_path / "a.yml").write_text("version: 1\n")
    os.mkfifo(tmp_path / "b.yml")  # before: skipped, and check said "ok" about a.yml alone
    _refused(_cli("check", "-i", str(tmp_path)), f"{tmp_path / 'b.yml'}:1:1:",
             "not a regular file")


def test_an_inventory_that_is_not_utf8_names_the_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_bytes(b"version: 1\nhosts:\n  g\xff: {address: 10.0.0.1}\n")
    _refused(_cli("check", "-i", str(p)), f"{p}:3:4:", "byte 0xff")


def test_a_dangling_symlink_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / "inv.yml").symlink_to("elsewhere.yml")
    _refused(_cli("check", "-i", str(tmp_path / "inv.yml")),
             "a symbolic link to elsewhere.yml, which does not exist")


# --- the state directory itself, not only migrations/ inside it -------------------------

@pytest.mark.parametrize("setup,why", [
    ("mode-777", "is writable by group and others"),
    ("a-file", "is not a directory"),
    ("a-symlink", "is a symlink"),
])
@pytest.mark.parametrize("command", [["dns", "migrate", "status"],
                                     ["dns", "migrate", "start", "api", "--to", "192.0.2.9"]],
                         ids=["status", "start"])
def test_the_state_directory_above_migrations_is_private_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, why: str,
        command: list[str]) -> None:
    import os

    state = tmp_path / "shared"
    if setup == "mode-777":
        state.mkdir()
        os.chmod(state, 0o777)
    elif setup == "a-file":
        state.write_text("x")
    else:
        (tmp_path / "real").mkdir(mode=0o700)
        state.symlink_to(tmp_path / "real")
    monkeypatch.setenv("PROVISION_STATE_DIR", str(state))
    # before: only migrations/ was checked; a 0777 state directory was used as it was (and
    # migrations/ made inside it), a file there was a NotADirectoryError traceback
    _refused(_cli(*command, "-i", str(_rfc2136(tmp_path, "tsig.key"))), why)
    assert not (tmp_path / "real" / "migrations").exists()
    if setup == "mode-777":
        assert not (state / "migrations").exists()


# --- ssh-config --write into unusual home directories ---------------------------------

def _ssh_home(tmp_path: Path, setup: str) -> Path:
    import os

    home = tmp_path / "home"
    ssh = home / ".ssh"
    if setup == "ssh-is-a-file":
        home.mkdir()
        ssh.write_text("x")
        return home
    ssh.mkdir(parents=True)
    if setup == "config-fifo":
        os.mkfifo(ssh / "config")
    elif setup == "config-dangling-link":
        (ssh / "config").symlink_to(tmp_path / "dotfiles" / "ssh_config")
    elif setup == "config-not-utf8":
        (ssh / "config").write_bytes(b"Host a\n  User \xff\n")
    elif setup == "config-d-is-a-file":
        (ssh / "config.d").write_text("x")
    return home


@pytest.mark.parametrize("setup,why", [
    ("ssh-is-a-file", "exists and is not a directory"),
    ("config-fifo", "not a regular file"),
    ("config-dangling-link", "which does not exist"),
    ("config-not-utf8", "config:2: not UTF-8"),
    ("config-d-is-a-file", "exists and is not a directory"),
])
def test_ssh_config_write_refuses_an_unusable_ssh_directory_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, why: str) -> None:
    home = _ssh_home(tmp_path, setup)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    inv = tmp_path / "inv.yml"
    inv.write_text("version: 1\nhosts:\n  gpu1: {address: 10.0.0.1}\n")
    monkeypatch.setenv("HOME", str(home))
    # before: a FIFO hung, non-UTF-8 was a traceback, "File exists" for a file named .ssh,
    # a dangling link was followed (a file created wherever it pointed), and provision.conf
    # was written before ~/.ssh/config was found unusable
    _refused(_cli("ssh-config", "--write", "-i", str(inv)), why)
    after = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert after == sorted([*before, "inv.yml"])


# --- render --out: where it writes ----------------------------------------------------

_NODE = "version: 1\nhosts:\n  gpu1: {address: 10.0.0.1, ssh_from: [10.0.0.0/8]}\n"


def test_render_to_a_relative_out_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "inv.yml").write_text(_NODE)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # new, then merged into the existing one
        r = _cli("render", "--out", "out", "-i", "inv.yml")  # before: a ValueError traceback
        assert r.exit_code == 0, r.output
        assert (tmp_path / "out" / "ssh_config").is_file()


@pytest.mark.parametrize("setup,why", [
    ("empty", "--out needs a directory"),
    ("dangling-link", "which does not exist"),
    ("link-inside", "is a symlink (provision writes through no link"),
    ("file-for-dir", "is a file where a directory goes"),
    ("dir-for-file", "is a directory where a file goes"),
])
def test_render_refuses_an_out_directory_it_would_write_through_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, why: str) -> None:
    (tmp_path / "inv.yml").write_text(_NODE)
    (tmp_path / "victim").mkdir()
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    if setup == "dangling-link":
        out.symlink_to(tmp_path / "nowhere")
    elif setup == "link-inside":
        (out / "gpu1" / "etc").mkdir(parents=True)
        (out / "gpu1" / "etc" / "ssh").symlink_to(tmp_path / "victim")
    elif setup == "file-for-dir":
        out.mkdir()
        (out / "gpu1").write_text("x")
    elif setup == "dir-for-file":
        (out / "ssh_config").mkdir(parents=True)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    # before: tracebacks (NotADirectoryError, FileExistsError), files written through the
    # link into victim/, and `--out ''` wrote into the current directory
    _refused(_cli("render", "--out", "" if setup == "empty" else str(out), "-i", "inv.yml"), why)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


# --- '*' in the inventory means what `dns check *` means --------------------------------

def _records(tmp_path: Path, records: dict[str, object]) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "dns": {"zones": {"example.org": {
        "provider": "rfc2136", "server": "127.0.0.1", "tsig_key_file": "tsig.key",
        "records": records}}}}, sort_keys=False))
    return p


def test_the_wildcard_below_the_apex_can_be_declared_as_a_star(tmp_path: Path) -> None:
    from provision.dns.rrset import desired
    from provision.inventory import load_inventory

    a = {"type": "A", "values": ["192.0.2.7"], "ttl": 300}
    # before: '*' was "invalid record name" although the CLI took '*' as *.example.org
    inv = load_inventory(_records(tmp_path, {"*": a}))
    assert inv.dns is not None
    assert [r.name for r in desired(inv.dns.zones[0])] == ["*.example.org."]
    _refused(_cli("check", "-i", str(_records(tmp_path, {"*": a, "*.example.org": a}))),
             "*.example.org")


# --- ports written with digits other than 0-9 (issue 34, class 9) ------------------------

# int() reads '８０００' (fullwidth) and '٨٠٠٠' (Arabic-Indic) as 8000, and str.isdigit()
# takes '²', which int() then refuses: before, `--port web=²` ended in a traceback
UNICODE_PORTS = {"fullwidth": "８０００", "arabic_indic": "٨٠٠٠", "superscript": "²",
                 "devanagari": "८०००"}


def _tunnel_inventory(tmp_path: Path) -> Path:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "hosts": {"gpu1": {
        "address": "127.0.0.1", "port": 1, "ssh_from": ["10.0.0.0/8"],
        "services": {"web": {"port": 8000, "command": "/bin/true"}}}}}, sort_keys=False))
    return p


@pytest.mark.parametrize("digits", list(UNICODE_PORTS.values()), ids=list(UNICODE_PORTS))
def test_a_port_in_other_digits_is_a_clear_error_everywhere(tmp_path: Path, digits: str) -> None:
    inv = _tunnel_inventory(tmp_path)
    why = "is not a port (1-65535, written with the digits 0-9)"
    _refused(_cli("tunnel", "-i", str(inv), "gpu1", "--port", f"web={digits}"),
             f"--port web={digits}: ", why)
    for spec in (f"tcp:{digits}", f"http://api.example.org:{digits}/health"):
        _refused(_cli("dns", "migrate", "cutover", "-i", str(inv), "api", "--health", spec),
                 f"--health {spec}: ", why)
    _refused(_cli("apply", "-i", str(inv), "--yes", "--shard", f"{digits}/3"), "--shard")
    # in the inventory: text, not a number, and said so
    text = inv.read_text().replace("port: 8000", f"port: '{digits}'")
    inv.write_text(text, encoding="utf-8")
    _refused(_cli("check", "-i", str(inv)), "hosts.gpu1.services.web.port: ",
             "is text, not a number: write it with the digits 0-9")


@pytest.mark.parametrize(("spec", "port"), [
    ("tcp:8000", 8000), ("http://api.example.org/", 80), ("https://api.example.org/", 443),
    ("http://[::1]:8080/x", 8080), ("https://u:p@api.example.org:8443/", 8443)])
def test_health_ports_in_ascii_digits_are_read(spec: str, port: int) -> None:
    from provision.dns.migrate.health import parse

    assert parse(spec).port == port
