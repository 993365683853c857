"""Everything printed goes through one escaping path: the bytes a terminal receives.

Hostile strings (ESC/CSI erase-line, OSC 52 clipboard writes, OSC 8 links, BEL, C1 CSI,
CR, bidi overrides and isolates, zero-width and other format characters, tag characters,
a line separator, rich markup and emoji codes) are put where outside text reaches the
screen: the inventory's path, `render --out`, `ssh-config --write`, and, in process with a
real rich Console that believes it writes to a terminal (TTY_COMPATIBLE=1, real file
descriptors captured), plan sections, the apply recap (a host's error output), the audit
report (a host's process names), tunnel URLs (a token from `jupyter server list`), `dns
check` answers and `dns migrate status` (a journal and a zone's answers).

What is checked, on the raw bytes: apart from provision's own colours (SGR, `ESC [ … m`),
no control, format, bidi or separator character reaches stdout or stderr; the escaped
spelling of each payload is there instead; and markup is printed literally.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from provision.text import is_unsafe, printable

ROOT = Path(__file__).resolve().parents[2]

# One string with every kind of attack on a terminal, and markup for rich.
HOSTILE = ("A\x1b[2KB\x1b]52;c;cm0gLXJmIH4K\x07C\x1b]8;;http://evil.example/\x1b\\D"
           "\x9b31mE\rF\u202eG\u2066H\u200bI\u00adJ\U000e0041K\u2028L\x08M"
           "[bold red]MARKUP[/bold red] [link=http://evil.example/]L[/link] :warning:")
# What must be printed instead: every unsafe character escaped, markup as it was.
ESCAPED = printable(HOSTILE)
LITERAL = ("[bold red]MARKUP[/bold red]", "[link=http://evil.example/]L[/link]", ":warning:")
# The same as a file name ('/' cannot be in one).
SGR = re.compile(r"\x1b\[[0-9;]*m")


def assert_clean(raw: bytes, *expect: str) -> str:
    """No raw unsafe character in `raw` apart from line breaks and provision's own SGR
    colours; each of `expect` appears in the text with the colours removed."""
    text = raw.decode("utf-8", errors="surrogateescape")
    plain = SGR.sub("", text)
    bad = sorted({f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in plain
                  if c != "\n" and is_unsafe(c)})
    assert not bad, f"raw characters reached the terminal: {bad}\n{text[-1500:]!r}"
    for e in expect:
        assert e in plain, f"{e!r} not printed literally in:\n{plain[-1500:]}"
    return plain


def test_the_payload_is_hostile() -> None:
    """The check above is not vacuous: the payload unescaped fails it."""
    with pytest.raises(AssertionError, match="raw characters"):
        assert_clean(HOSTILE.encode())
    assert "\\x1b]52;c;" in ESCAPED and "\\u202e" in ESCAPED and "\\U000e0041" in ESCAPED


# --- the CLI as a subprocess: the real stdout and stderr ----------------------------------------


def inventory(**extra: Any) -> dict[str, Any]:
    return {"version": 1, "defaults": {"user": "ubuntu"},
            "hosts": {"gpu1": {"address": "10.0.1.21", "ssh_from": ["10.0.0.0/16"], **extra}}}


# --- in process, a real rich Console on a terminal ----------------------------------------------

@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes]) -> Any:
    """Consoles made by provision believe they write to a terminal; returns a function that
    gives the bytes written to file descriptors 1 and 2 so far."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.delenv("NO_COLOR", raising=False)

    def written() -> bytes:
        sys.stdout.flush()
        sys.stderr.flush()
        got = capfdbinary.readouterr()
        return got.out + got.err
    return written


def test_console_is_a_terminal_with_colours(terminal: Any) -> None:
    """The fixture is what it claims: rich emits colours (so SGR is really filtered above)."""
    from rich.text import Text

    from provision.commands.common import console

    out = console()
    assert out.is_terminal
    out.print(Text("ok", style="green"))
    assert b"\x1b[32m" in terminal()


def test_plan_sections_are_escaped(terminal: Any) -> None:
    from provision.commands.plan_output import Change, Section, print_plan

    sections = [
        Section(f"host {HOSTILE}", (Change("~", f"[files] write {HOSTILE}", detail=(HOSTILE,),
                                           diff=(f"--- a/{HOSTILE}\n", f"-{HOSTILE}\n", f"+{HOSTILE}\n")),),
                notes=(HOSTILE,)),
        Section(HOSTILE, error=f"probe exited 1: {HOSTILE}", status="failed"),
    ]
    print_plan(sections, title=f"dns plan {HOSTILE}")
    plain = assert_clean(terminal(), *LITERAL, ESCAPED)
    assert plain.count(ESCAPED) >= 8


def test_apply_recap_escapes_a_hosts_error(terminal: Any) -> None:
    from provision.commands.converge_output import _print_recap

    run_ = SimpleNamespace(host=SimpleNamespace(name="gpu1"), status="failed", done=0, changes=0,
                           remote_execs=1, seconds=0.5, error=f"users: {HOSTILE}", note="")
    _print_recap([run_], f"apply: {HOSTILE}")
    assert_clean(terminal(), *LITERAL, ESCAPED)


def test_audit_escapes_process_names_and_errors(terminal: Any) -> None:
    from provision.commands.audit import _print
    from provision.exposure import live as LV
    from provision.facts import parse
    from provision.inventory import load_inventory

    aud = ROOT / "tests" / "fixtures" / "audit"
    inv = load_inventory(str(aud / "inventory.yml"))
    text = (aud / "gpu1-planted.txt").read_text()
    old = 'users:(("python3",pid=5358,fd=3))'
    assert old in text
    text = text.replace(old, f'users:(("{HOSTILE}",pid=5358,fd=3))')
    rep = LV.report(inv, inv.node("gpu1"), parse(text))
    ok = SimpleNamespace(host=inv.node("gpu1"), error="", seconds=0.1)
    down = SimpleNamespace(host=inv.node("bastion"), error=f"ssh: {HOSTILE}", seconds=0.1)
    _print(inv, [(ok, rep), (down, None)], [], "inventory", 0.2)
    assert_clean(terminal(), *LITERAL, ESCAPED)


def test_tunnel_table_escapes_urls(terminal: Any) -> None:
    from provision.commands.tunnel import _print_table

    row = SimpleNamespace(service="jupyter", url=f"http://127.0.0.1:8888/?token={HOSTILE}",
                          remote="127.0.0.1:8888", status=HOSTILE, listening=True)
    _print_table("gpu1", "openssh", [row])
    assert_clean(terminal(), *LITERAL, ESCAPED)


def test_dns_check_escapes_server_answers(terminal: Any) -> None:
    from provision.commands.dns import _print_check

    answer = SimpleNamespace(values=(HOSTILE,), status="ok", ttl=60, negative_ttl=None, aa=True,
                             target=SimpleNamespace(label=f"ns1.{HOSTILE}", address="10.0.0.53",
                                                    role="authoritative"))
    v = SimpleNamespace(name=f"api.{HOSTILE}", type="A", expected=("203.0.113.5",),
                        answers=(answer,), disagree=(f"ns1.{HOSTILE}",), notes=(HOSTILE,), ok=False)
    _print_check(v)
    assert_clean(terminal(), *LITERAL, ESCAPED)


def test_dns_migrate_status_escapes_journal_and_answers(terminal: Any) -> None:
    from provision.commands.dns_migrate import _print_status

    item = {"name": f"api.{HOSTILE}", "type": "A", "phase": HOSTILE, "started_at": HOSTILE,
            "original": {"values": [HOSTILE], "ttl": 300}, "target": {"values": [HOSTILE]},
            "lower_ttl": 60, "seconds_left": 3.0, "waiting_for": HOSTILE, "conflict": HOSTILE,
            "answers": [{"server": HOSTILE, "role": "resolver", "values": [HOSTILE],
                         "status": "ok", "ttl": 60, "aa": False, "serves": HOSTILE}],
            "notes": [HOSTILE], "next": HOSTILE}
    _print_status([item], None)
    assert_clean(terminal(), *LITERAL, ESCAPED)


def test_echo_escapes_a_whole_line(terminal: Any) -> None:
    from provision.commands.common import echo

    echo(f"created {HOSTILE}\nfake line")
    echo(HOSTILE, err=True)
    plain = assert_clean(terminal(), *LITERAL, ESCAPED)
    assert "\\nfake line" in plain  # one line stays one line


def test_the_console_guard_escapes_what_a_call_site_forgot(terminal: Any) -> None:
    """The last guard: raw outside text handed to the console (a str, a Text, a table cell,
    a table title, a status line) still reaches the terminal escaped, and markup in it is
    not interpreted."""
    from rich.table import Table
    from rich.text import Text

    from provision.commands.common import console

    out = console()
    out.print(HOSTILE)
    out.print(Text(HOSTILE, style="bold"))
    t = Table(title=HOSTILE)
    t.add_column(HOSTILE)
    t.add_row(HOSTILE)
    out.print(t)
    console(stderr=True).print(HOSTILE)
    raw = terminal()
    assert_clean(raw, *LITERAL)
    assert b"\x1b]" not in raw and b"\x07" not in raw and "\u202e".encode() not in raw


def test_a_stream_in_pieces_is_escaped_as_a_whole() -> None:
    """A host's output shown as it comes (the Fabric API's echo): cut anywhere, it reads as
    `printable_lines` of the whole, but a pty's CR LF is one line break and a lone CR (which
    lets later text overwrite the line) is escaped, also when the pieces split it."""
    from provision.text import PrintableStream, printable_lines

    text = f"one\r\n{HOSTILE}\r\nlast\r"
    whole = printable_lines(text.replace("\r\n", "\n"))
    assert whole.endswith("\nlast\\r") and "\r" not in whole.replace("\\r", "")
    for cut in range(len(text) + 1):
        s = PrintableStream()
        assert s.feed(text[:cut]) + s.feed(text[cut:]) + s.end() == whole, cut
    s = PrintableStream()
    assert "".join(s.feed(c) for c in text) + s.end() == whole
    assert_clean(whole.encode(), ESCAPED)
