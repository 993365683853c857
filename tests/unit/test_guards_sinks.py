"""The guards at every sink (provision.render.sinks), proven: each filter refuses what
would change the meaning of the file it writes into, accepts what the inventory allows,
and every template applies it where inventory values land.

Pure: plain values in, text or RenderError out. The values that reach the renderers here
bypass the inventory's validation on purpose (a model built or changed after loading):
the sinks are the second line, and must hold without the first."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from provision.errors import RenderError
from provision.inventory import load_inventory
from provision.inventory.model import Host, Inventory
from provision.render import sinks
from provision.render.host import render_host
from provision.render.ssh_config import render_ssh_config

FIXTURE = Path(__file__).parent.parent / "fixtures" / "example.yml"


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(FIXTURE)


# --- comment ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "want"), [
    ("gpu1", "gpu1"),
    ("a\nrm -rf /", "a\\nrm -rf /"),
    ("x\r\ty", "x\\r\\ty"),
    ("\x1b[2K", "\\x1b[2K"),
    (12, "12"),
])
def test_comment_is_one_line_with_controls_escaped(value: object, want: str) -> None:
    assert sinks.comment(value) == want


# --- ssh_token --------------------------------------------------------------------------------

@pytest.mark.parametrize("ok", [
    "gpu1", "10.0.1.21", "2001:db8::1", "[2001:db8::1]:22", "~/.ssh/id_ed25519", "ubuntu",
    "jump,jump2", "localhost:8888", "a+b=c@d", "A_Z-0.9", 22,
])
def test_ssh_token_accepts_plain_tokens(ok: object) -> None:
    assert sinks.ssh_token(ok) == str(ok)


@pytest.mark.parametrize("bad", [
    "", "a b", "a\tb", "a\nHost *", '"x"', "'x'", "%h", "a#b", "$HOME", "a;b", "a\\b",
    "a\x00b", "café", "a*", "a?", "!a",
])
def test_ssh_token_refuses_what_ssh_config_reads_differently(bad: str) -> None:
    with pytest.raises(RenderError, match="into ssh_config"):
        sinks.ssh_token(bad)


def test_ssh_token_message_escapes_and_names_the_safe_set() -> None:
    with pytest.raises(RenderError) as e:
        sinks.ssh_token("x\x1b]52;c;AAAA\x07")
    assert "\x1b" not in str(e.value) and "\x07" not in str(e.value)
    assert "refusing to write" in str(e.value) and "are safe there" in str(e.value)


# --- ipt_source -------------------------------------------------------------------------------

@pytest.mark.parametrize("ok", ["10.0.0.0/16", "0.0.0.0/0", "203.0.113.7/32", "::/0",
                                "2001:db8::/32", "2001:db8::1/128"])
def test_ipt_source_accepts_canonical_networks(ok: str) -> None:
    assert sinks.ipt_source(ok) == ok


@pytest.mark.parametrize(("bad", "why"), [
    ("10.0.0.0/16 -j ACCEPT", "as an iptables source"),   # a second word: another option
    ("10.0.0.0/16\n-A INPUT -j ACCEPT", "as an iptables source"),  # a second rule
    ("!10.0.0.0/8", "as an iptables source"),             # negation
    ("10.0.0.1/16", "not a network"),                     # host bits set
    ("eth0", "not a network"),
    ("10.0.0.0/33", "not a network"),
    ("10.0.0.0", "not canonical"),                        # a bare address, not CIDR text
    ("2001:DB8::/32", "not canonical"),                   # upper case spelling
    ("2001:db8:0::/48", "not canonical"),
    ("", "as an iptables source"),
    # ipaddress keeps an IPv6 scope id (any text after %) and calls it canonical: only the
    # character check stops it
    ("fe80::%eth0/64", "as an iptables source"),
    ("fe80::%1/64", "as an iptables source"),
])
def test_ipt_source_refuses_words_rules_and_non_canonical_text(bad: str, why: str) -> None:
    with pytest.raises(RenderError, match=why):
        sinks.ipt_source(bad)


# --- unit_value -------------------------------------------------------------------------------

@pytest.mark.parametrize("ok", [
    "/opt/venv/bin/uvicorn app:api --host 127.0.0.1 --port 8000", "svc-model", "~", "/srv/a b",
    "PYTHONUNBUFFERED", "1", "a;b", "x:y", "a-b", "/bin/x --flag=+1",
])
def test_unit_value_accepts_plain_values(ok: str) -> None:
    assert sinks.unit_value(ok) == ok


@pytest.mark.parametrize(("bad", "why"), [
    ("a\nExecStartPre=/bin/sh", "control characters"),
    ("a\x1fb", "control characters"),
    ("a\x7fb", "control characters"),
    ("a\x00", "control characters"),
    ("%h/x", "'%'"), ("$HOME/x", "'\\$'"), ("a\\", "'\\\\\\\\'"), ('a"b', "'\"'"), ("a'b", '"\'"'),
    ("+/bin/sh", "leading '\\+'"), ("!/bin/sh", "leading '!'"), ("@/bin/sh", "leading '@'"),
    ("-/bin/sh", "leading '-'"), (":/bin/sh", "leading ':'"),
    ("/bin/a ; /bin/b", "lone ';'"), ("/bin/a\t;", "control characters"), ("/bin/a ;", "lone ';'"),
])
def test_unit_value_refuses_what_systemd_reads_differently(bad: str, why: str) -> None:
    with pytest.raises(RenderError, match=why):
        sinks.unit_value(bad)


def test_unit_value_space_is_not_a_control_character() -> None:
    # the boundary: 0x20 is allowed, 0x1f is not
    assert sinks.unit_value(" a") == " a"


@pytest.mark.parametrize(("value", "want"), [
    ("jupyter", "jupyter"), ("50%", "50%%"), ("a\\b", "a\\\\b"), ("a\nb", "a\\\\nb"),
    ("%%", "%%%%"),
])
def test_unit_text_escapes_specifiers_and_lines(value: str, want: str) -> None:
    assert sinks.unit_text(value) == want


# --- every template applies its filter where inventory values land -------------------------

def _with_host(inv: Inventory, node: str, **changes: object) -> tuple[Inventory, Host]:
    host = dataclasses.replace(inv.node(node), **changes)  # type: ignore[arg-type]
    hosts = tuple(host if h.name == node else h for h in inv.hosts)
    bastions = tuple(host if h.name == node else h for h in inv.bastions)
    changed = dataclasses.replace(inv, hosts=hosts, bastions=bastions)
    return changed, host


def test_ssh_config_refuses_unsafe_user_identity_and_known_hosts(inv: Inventory) -> None:
    for kwargs in ({"user": "a b"}, {"user": "x\nHost *"}, {"identity_file": "~/.ssh/k %d"},
                   {"known_hosts": "/tmp/k h"}):
        with pytest.raises(RenderError, match="into ssh_config"):
            render_ssh_config(inv, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [
    ("name", "gpu1 *"), ("address", "10.0.1.21 -oProxyCommand=x"), ("user", "ubuntu\n  Match all"),
    ("identity_file", "~/.ssh/a b"), ("port", "22 x"),
])
def test_ssh_config_refuses_each_unsafe_host_field(inv: Inventory, field: str, value: str) -> None:
    changed, _ = _with_host(inv, "gpu1", **{field: value})
    with pytest.raises(RenderError, match="into ssh_config"):
        render_ssh_config(changed)


def test_ssh_config_refuses_an_unsafe_proxy_jump(inv: Inventory) -> None:
    bastion = dataclasses.replace(inv.node("jump"), name="jump x")
    hosts = tuple(dataclasses.replace(h, jump_chain=("jump x",)) for h in inv.hosts)
    changed = dataclasses.replace(inv, bastions=(bastion,), hosts=hosts)
    with pytest.raises(RenderError, match="into ssh_config"):
        render_ssh_config(changed)


@pytest.mark.parametrize("bad", ["10.0.0.0/16 -j ACCEPT", "10.0.0.0/16\n-A INPUT -j ACCEPT",
                                 "10.0.0.1/16"])
def test_iptables_template_refuses_an_unsafe_source(bad: str) -> None:
    # the firewall model canonicalises its sources; the template must hold without that
    from provision.firewall.rules import Rule, Ruleset
    from provision.render.env import render

    ok = Ruleset(4, "PROVISION-IN", "INPUT", (Rule("ACCEPT", "ssh", source="10.0.0.0/16",
                                                   proto="tcp", dport=22),))
    text = render("iptables.rules.j2", host="gpu1", ruleset=ok, path="/etc/iptables/rules.v4")
    assert "-A PROVISION-IN -s 10.0.0.0/16 -p tcp -m tcp --dport 22" in text
    bad_set = dataclasses.replace(ok, rules=(dataclasses.replace(ok.rules[0], source=bad),))
    with pytest.raises(RenderError, match="iptables source"):
        render("iptables.rules.j2", host="gpu1", ruleset=bad_set, path="/etc/iptables/rules.v4")


@pytest.mark.parametrize(("field", "value"), [
    ("user", "root\nExecStartPre=/bin/sh -c x"), ("user", "%u"),
    ("command", "+/bin/sh -c id"), ("command", "/bin/a ; /bin/b"), ("command", "/bin/echo $HOME"),
    ("notebook_dir", "/srv/%h"),
])
def test_units_refuse_each_unsafe_service_field(inv: Inventory, field: str, value: str) -> None:
    host = inv.node("gpu1")
    svc = dataclasses.replace(host.service("model-api"), **{field: value})  # type: ignore[arg-type]
    changed, host = _with_host(inv, "gpu1", services=(svc,))
    with pytest.raises(RenderError, match="into a unit"):
        render_host(changed, host)


def test_unit_description_and_every_header_comment_stay_one_line(inv: Inventory) -> None:
    host = inv.node("gpu1")
    svc = dataclasses.replace(host.service("model-api"), name="api%n")  # type: ignore[arg-type]
    changed, host = _with_host(inv, "gpu1", name="gpu1\nExecStartPre=/bin/sh", services=(svc,))
    artifacts = render_host(changed, host)
    assert len(artifacts) >= 5
    for a in artifacts:
        for line in a.content.splitlines():
            assert not line.startswith("ExecStartPre"), (a.path, line)
        assert "gpu1\\nExecStartPre" in a.content, a.path   # the header names the host, escaped
    (unit,) = [a for a in artifacts if a.path.endswith("provision-api%n.service")]
    (desc,) = [ln for ln in unit.content.splitlines() if ln.startswith("Description=")]
    assert desc.startswith("Description=provision: api%%n on ")


@pytest.mark.parametrize("name", ['api" -j ACCEPT -m comment --comment "x', "api\n-A INPUT -j ACCEPT",
                                  "api\\", "api\u202e", "a" * 250])
def test_iptables_comments_refuse_quotes_lines_and_overlong_text(inv: Inventory, name: str) -> None:
    """A service name lands in `--comment "service NAME"` of the v4/v6 and docker rules."""
    host = inv.node("gpu1")
    svc = dataclasses.replace(host.service("model-api"), name=name)  # type: ignore[arg-type]
    changed, host = _with_host(inv, "gpu1", services=(svc,))
    with pytest.raises(RenderError, match="as an iptables comment"):
        render_host(changed, host)


@pytest.mark.parametrize(("value", "ok"), [("ssh", True), ("service s_9.x-", True),
                                           ("a" * 256, True), ("a" * 257, False), ('a"', False),
                                           ("a\\", False), ("a\tb", False), ("a\u200bb", False)])
def test_ipt_comment(value: str, ok: bool) -> None:
    if ok:
        assert sinks.ipt_comment(value) == value
    else:
        with pytest.raises(RenderError, match="at most 256 printable characters"):
            sinks.ipt_comment(value)


@pytest.mark.parametrize(("fn", "value", "message"), [
    (sinks.ssh_token, "a b", "refusing to write 'a b' into ssh_config (only letters, digits and "
     ". _ ~ / @ : + , = [ ] - are safe there)"),
    (sinks.ipt_source, "a b", "refusing to write 'a b' as an iptables source"),
    (sinks.ipt_source, "eth0", "refusing to write 'eth0' as an iptables source (not a network)"),
    (sinks.ipt_source, "10.0.0.0", "refusing to write '10.0.0.0' as an iptables source (not "
     "canonical: 10.0.0.0/32)"),
    (sinks.ipt_comment, 'a"', "refusing to write 'a\"' as an iptables comment (at most 256 "
     "printable characters, no quote or backslash)"),
    (sinks.unit_value, "a\nb", "refusing to write 'a\\\\nb' into a unit (control characters)"),
    (sinks.unit_value, "%h", "refusing to write '%h' into a unit ('%' changes its meaning)"),
    (sinks.unit_value, "+x", "refusing to write '+x' into a unit (a leading '+' changes how "
     "systemd runs it)"),
    (sinks.unit_value, "a ; b", "refusing to write 'a ; b' into a unit (a lone ';' starts "
     "another command)"),
])
def test_refusals_say_what_and_why_in_words(fn: object, value: str, message: str) -> None:
    with pytest.raises(RenderError) as e:
        fn(value)  # type: ignore[operator]
    assert str(e.value) == message


def test_ipt_comment_accepts_capitals() -> None:
    assert sinks.ipt_comment("service X-Ray") == "service X-Ray"
