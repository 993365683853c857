"""A host's output is outside data: the facts probe's answer, `jupyter server list`, and
playbook files given with --playbook are validated before they drive a write or reach the
terminal. Hostile answers are made from a real probe answer captured in the lab
(tests/fixtures/audit/gpu1-clean.txt) with one record changed: what decides (users,
files, units, rules) is refused with the line named; what only describes (process and
container names) is escaped; no content ends in a traceback or a hang.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from provision.cli import main
from provision.facts import docker as D
from provision.facts import listeners as L
from provision.facts import parse
from provision.facts.spec import FactsError
from provision.inventory.forwards import Forward
from provision.playbook import MAX_PLAYBOOK_BYTES, PlaybookError, load
from provision.text import unsafe
from provision.tunnel.status import service_url
from provision.tunnel.tokens import parse_jupyter_list

ROOT = Path(__file__).resolve().parents[1]
CLEAN = (ROOT / "fixtures" / "audit" / "gpu1-clean.txt").read_text()
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"


def answer(old: str = "", new: str = "", extra: str = "") -> str:
    text = CLEAN
    if old:
        assert old in text, old
        text = text.replace(old, new, 1)
    if extra:
        text = text.replace("\nend", "\n" + extra + "\nend")
    return text


REFUSED = {
    # records that decide what apply writes
    "user-name-escape": ("user\talice\t1002", f"user\talice{OSC52}\t1002"),
    "user-home-bidi": ("/home/alice\t/bin/bash", "/home/al\u202eice\t/bin/bash"),
    "file-path-zero-width": ("file\t/home/bob/.ssh/authorized_keys", "file\t/home/bob/.ssh/authorized\u200b_keys"),
    "iptables-rule-csi": ("--comment loopback", "--comment loop\x1b[2Kback"),
    "iptables-rule-tag-chars": ("--comment loopback", "--comment loop\U000e0041back"),
    "iptables-rule-nbsp": ("--comment loopback", "--comment loop\u00a0back"),
}


@pytest.mark.parametrize(("old", "new"), list(REFUSED.values()), ids=list(REFUSED))
def test_unsafe_text_in_a_deciding_record_refuses_the_answer(old: str, new: str) -> None:
    text = answer(old, new)
    line = text.split("\n").index(next(x for x in text.split("\n") if new.split("\t")[-1] in x)) + 1
    with pytest.raises(FactsError, match=rf"^line {line}: the host's answer holds the character") as e:
        parse(text)
    assert unsafe(str(e.value)) is None  # the message itself is printable


def test_a_process_name_is_descriptive_text_escaped_not_refused() -> None:
    facts = parse(answer('users:(("sshd",pid=41,fd=3))', f'users:(("ss{OSC52}hd\u202e",pid=41,fd=3))'))
    listeners = facts.get(L.SPEC)
    names = [x.process for x in listeners if x.port == 22]
    assert any("\\x1b]52;c;" in n and "\\u202e" in n for n in names), names
    for x in listeners:
        assert unsafe(x.process) is None


MALFORMED = {
    "port-superscript": ('127.0.0.1:8888      0.0.0.0:*', '127.0.0.1:\u00b2      0.0.0.0:*'),
    "port-arabic-digits": ('127.0.0.1:8888      0.0.0.0:*', '127.0.0.1:\u0668\u0668      0.0.0.0:*'),
    "port-huge": ('127.0.0.1:8888      0.0.0.0:*', '127.0.0.1:' + '9' * 5000 + '      0.0.0.0:*'),
    "pid-huge": ('pid=207,', 'pid=' + '9' * 5000 + ','),
    "uid-not-a-number": ("user\talice\t1002", "user\talice\tNaN"),
    "file-mode-garbage": ("\t600\talice\talice\t1796008450", "\t6z0\talice\talice\t1796008450"),
    "file-content-not-base64": ("\t600\talice\talice\t1796008450\tIyBN", "\t600\talice\talice\t1796008450\t!!!IyBN"),
    "missing-fields": ("user\talice\t1002\talice\t/home/alice\t/bin/bash\t-\talice", "user\talice"),
}


@pytest.mark.parametrize(("old", "new"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_records_are_an_error_or_ignored_never_a_crash(old: str, new: str) -> None:
    try:
        parse(answer(old, new))
    except FactsError as e:
        assert unsafe(str(e)) is None


def test_limits_of_an_answer() -> None:
    with pytest.raises(FactsError, match="exceeds its limits"):
        parse(answer(extra="ltcp\t" + "x" * 300_000))
    with pytest.raises(FactsError, match="exceeds its limits"):
        parse(answer(extra="\n".join(["pkg\tx\tinstalled\t1"] * 200_001)))
    with pytest.raises(FactsError, match="truncated"):
        parse(CLEAN.replace("\nend", ""))


def test_docker_port_ranges_are_bounded() -> None:
    """`docker ps` (a container's owner chooses it) cannot make the parser count to a
    billion: a range beyond 65535 or backwards publishes nothing."""
    assert D.parse_ports("c", "0.0.0.0:1-999999999->80/tcp") == []
    assert D.parse_ports("c", "0.0.0.0:9000-10->80/tcp") == []
    assert D.parse_ports("c", "0.0.0.0:\u00b2->80/tcp") == []
    assert [p.port for p in D.parse_ports("c", "0.0.0.0:8000-8002->80/tcp")] == [8000, 8001, 8002]


# --- jupyter server list --json ------------------------------------------------------------------

def jupyter(**info: object) -> str:
    import json

    return json.dumps({"port": 8888, "base_url": "/", "token": "ab12", **info})


@pytest.mark.parametrize(("field", "value"), [
    ("base_url", "@evil.example/"), ("base_url", "//evil.example/"), ("base_url", "/x?y=z"),
    ("base_url", "/\x1b]8;;http://evil/\x1b\\"), ("base_url", ["/"]),
    ("token", "ab\x1b[2K"), ("token", "a&redirect=http://evil"), ("token", "x" * 300),
    ("token", {"t": 1}),
])
def test_a_hostile_jupyter_listing_is_refused(field: str, value: object) -> None:
    st = parse_jupyter_list(jupyter(**{field: value}), 8888)
    assert st is not None and st.token is None and st.base_url == "/" and "refused" in st.note
    url = service_url(Forward("jupyter", 8888, "127.0.0.1", 8888, "http"), st)
    assert url == "http://127.0.0.1:8888/" and unsafe(url) is None


@pytest.mark.parametrize("text", [jupyter(port="8888"), jupyter(port=8888.0), jupyter(port=True),
                                  "[" * 100_000, "{" + '"a":[' * 50_000, "{not json", "{}" * 40_000])
def test_odd_listings_are_not_this_server_and_no_crash(text: str) -> None:
    assert parse_jupyter_list(text, 8888) is None


def test_a_plain_listing_still_gives_the_url() -> None:
    st = parse_jupyter_list("noise\n" + jupyter(base_url="/user/alice/", token="0f" * 24), 8888)
    assert st is not None and st.note == ""
    assert service_url(Forward("jupyter", 8888, "127.0.0.1", 8888, "http"), st) == \
        f"http://127.0.0.1:8888/user/alice/?token={'0f' * 24}"


# --- playbook files -----------------------------------------------------------------------------

def playbook(tmp_path: Path, text: str | bytes, name: str = "pb.yml") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


PLAYBOOKS: dict[str, tuple[str | bytes, str]] = {
    "escape-in-comment": ("hosts: all\nsteps: [users]  # \x1b]52;c;eA==\x07\n", "pb.yml:2:19: character"),
    "bidi-in-host": ("hosts: [all, \"gpu\\u202e1\"]\nsteps: [users]\n", "pb.yml:1:14: hosts[1]: character '\\\\u202e'"),
    "zero-width-step": ("hosts: all\nsteps: [\"users\\u200b\"]\n", "pb.yml:2:9: steps[0]: character"),
    "name-with-markup-and-spaces": ("name: \"[bold]x y\"\nhosts: all\nsteps: [users]\n", "pb.yml:1:7: name: a name must not contain whitespace"),
    "name-escape": ("name: \"a\\x1bb\"\nhosts: all\nsteps: [users]\n", "pb.yml:1:7: name:"),
    "description-tag-char": ("description: \"x\\U000e0041\"\nhosts: all\nsteps: [users]\n", "pb.yml:1:14: description: character"),
    "not-utf8": (b"hosts: all\nsteps: [us\xffers]\n", "pb.yml:2:11: not UTF-8"),
    "deep-nesting": ("hosts: " + "[" * 20_000 + "\n", "pb.yml:"),
    "too-large": ("hosts: all\nsteps: [users]\n#" + "x" * MAX_PLAYBOOK_BYTES + "\n", "too large"),
    "python-tag": ("hosts: !!python/object/apply:os.system [id]\nsteps: [users]\n", "pb.yml:1:8: hosts: a non-empty list"),
}


@pytest.mark.parametrize(("text", "message"), list(PLAYBOOKS.values()), ids=list(PLAYBOOKS))
def test_hostile_playbook_files_are_refused(tmp_path: Path, text: str | bytes, message: str) -> None:
    p = playbook(tmp_path, text)
    with pytest.raises(PlaybookError) as e:
        load(str(p))
    assert message.replace("pb.yml", str(p)) in str(e.value) or message in str(e.value), str(e.value)
    assert e.value.exit_code == 2


def test_a_fifo_or_device_playbook_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pb.yml"
    os.mkfifo(fifo)
    with pytest.raises(PlaybookError, match="not a regular file"):
        load(str(fifo))
    (tmp_path / "zero.yml").symlink_to("/dev/zero")
    with pytest.raises(PlaybookError, match="not a regular file"):
        load(str(tmp_path / "zero.yml"))
    with pytest.raises(PlaybookError, match="not a regular file"):
        load(str(tmp_path))  # a directory, given as a path
    with pytest.raises(PlaybookError, match="no such playbook file"):
        load(str(tmp_path / "missing.yml"))


@pytest.mark.parametrize(("make", "kind"), [
    (lambda d: Path("/dev/zero"), "a character device"),
    (lambda d: Path("/dev/null"), "a character device"),
    (lambda d: (os.mkfifo(d / "pb.yml"), d / "pb.yml")[1], "a FIFO (named pipe)"),
    (lambda d: d, "a directory"),
], ids=["dev-zero", "dev-null", "fifo", "directory"])
def test_a_playbook_path_that_is_no_file_says_what_it_is_and_what_is_allowed(
        tmp_path: Path, make: Callable[[Path], Path], kind: str) -> None:
    """Issue 34, class 9: before, every one of these got "not a regular file (a playbook is
    a .yml file)" (a socket: tests/integration/test_hostile_cli_process.py)."""
    path = make(tmp_path)
    r = CliRunner().invoke(main, ["plan", "-i", str(_inventory(tmp_path)), "--playbook",
                                  str(path)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert (f"{path}: {kind}, not a regular file: --playbook takes a playbook file (a "
            "regular .yml file of UTF-8 text, at most 1 MiB) or the name of a shipped "
            "playbook (bootstrap-gpu-server, harden)") in r.stderr, r.stderr


def _inventory(tmp_path: Path) -> Path:
    inv = tmp_path.parent / f"{tmp_path.name}-inventory.yml"
    inv.write_text(yaml.safe_dump({"version": 1, "hosts": {"gpu1": {"address": "10.0.1.21"}}}))
    return inv


def test_plan_with_a_hostile_playbook_exits_2_cleanly(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"version": 1, "hosts": {"gpu1": {"address": "10.0.1.21"}}}))
    pb = playbook(tmp_path, "hosts: all\nsteps: [users]  # \x1b]52;c;eA==\x07\n")
    r = CliRunner().invoke(main, ["plan", "-i", str(inv), "--playbook", str(pb)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and unsafe(r.stderr.replace("\n", " ")) is None
    assert f"{pb}:2:" in r.stderr


def test_a_gpu_name_is_descriptive_text_escaped_and_its_row_no_longer_counts() -> None:
    """nvidia-smi's lines only describe: an escape in a GPU's name is escaped, not acted on,
    and a row whose index is not plain digits is no row (so it names no GPU a member's
    `gpus` could be checked against)."""
    row = ", NVIDIA H100 80GB HBM3, GPU-6b1f0c4e, 550.90.07, 81559, Enabled, 0, 00000000:19:00.0"
    facts = parse(answer(extra=f"gpuline\t0{row.replace('H100', 'H1' + OSC52 + '00')}\n"
                               f"gpuline\t\u0661{row}\ngpusmi\t0"))
    gpus = facts.gpus
    assert [g.index for g in gpus.devices] == [0]
    assert "\\x1b]52;c;" in gpus.devices[0].name and unsafe(gpus.summary) is None
    assert gpus.messages == (f"\u0661{row}",)  # not a row: index ١ is no ASCII digit
