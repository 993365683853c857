"""Writing a record's new values back into the inventory (`dns migrate finalize` after an
ad hoc --to): only that record's values change; comments, order, quoting and layout of
everything else stay byte for byte; the right file of a directory inventory; refusals
leave the file untouched."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest

from provision.inventory import load_inventory
from provision.inventory.writeback import WriteBackError, prepare, rewrite, write

FIXTURE = Path(__file__).parents[1] / "fixtures" / "writeback" / "commented.yml"


def _changed(old: str, new: str) -> list[tuple[str, str]]:
    """(old line, new line) pairs of every line that differs ('' for added/removed)."""
    out = []
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            a, b = old.splitlines()[i1:i2], new.splitlines()[j1:j2]
            out += [(a[k] if k < len(a) else "", b[k] if k < len(b) else "")
                    for k in range(max(len(a), len(b)))]
    return out


@pytest.mark.parametrize("name, rtype, values, expect", [
    ("app", "A", ("10.1.0.9",),
     [("          values: ['10.1.0.5']    # old box, retiring",
       "          values: ['10.1.0.9']    # old box, retiring")]),
    ("app", "A", ("10.1.0.9", "10.1.0.10"),   # a second value; the comment keeps its gap
     [("          values: ['10.1.0.5']    # old box, retiring",
       "          values: ['10.1.0.9', '10.1.0.10']    # old box, retiring")]),
    ("api", "A", ("10.1.0.9",),
     [("        api: {type: A, values: [10.1.0.7, 10.1.0.8], ttl: 60}",
       "        api: {type: A, values: [10.1.0.9], ttl: 60}")]),
    ("web", "CNAME", ("gpu1.lab.test.",),   # the file's spelling: no trailing dot, quoted
     [('            value: "app.lab.test"   # quoted', '            value: "gpu1.lab.test"   # quoted')]),
    ("both", "A", ("10.1.0.30", "10.1.0.31", "10.1.0.32"),  # a value's comment goes with it
     [("              - 10.1.0.20   # first", "              - 10.1.0.30"),
      ("              - 10.1.0.21", "              - 10.1.0.31"),
      ("", "              - 10.1.0.32")]),
    ("both", "A", ("10.1.0.21",),             # the kept value stays, the other goes
     [("              - 10.1.0.20   # first", "")]),
    ("both", "A", ("10.1.0.20", "10.1.0.99"),  # ... with its comment
     [("              - 10.1.0.21", "              - 10.1.0.99")]),
    ("both", "A", ("10.1.0.99", "10.1.0.21"),  # one for one: the line changes, its comment stays
     [("              - 10.1.0.20   # first", "              - 10.1.0.99   # first")]),
    ("both", "AAAA", ("fd00::2",),
     [('          - {type: AAAA, values: ["fd00::1"]}', '          - {type: AAAA, values: ["fd00::2"]}')]),
])
def test_only_the_records_values_change(name: str, rtype: str, values: tuple[str, ...],
                                        expect: list[tuple[str, str]]) -> None:
    old = FIXTURE.read_text()
    new, line, _ = rewrite(old, str(FIXTURE), "lab.test", name, rtype, values)
    assert _changed(old, new) == expect
    assert old.splitlines()[line - 1].strip().startswith(("- type", "- {type", f"{name}:"))


def test_prepare_then_write_in_a_directory_inventory(tmp_path: Path) -> None:
    inv_dir = tmp_path / "inv"
    inv_dir.mkdir()
    (inv_dir / "00-base.yml").write_text("# base\nversion: 1\n")
    shutil.copy(FIXTURE, inv_dir / "10-dns.yml")
    (inv_dir / "10-dns.yml").write_text(FIXTURE.read_text().replace("version: 1\n", ""))
    (inv_dir / "10-dns.yml").chmod(0o640)
    inv = load_inventory(inv_dir)
    before = (inv_dir / "10-dns.yml").read_text()
    edit = prepare(inv, "lab.test", "app", "A", ("10.1.0.9",))
    assert edit.file == (inv_dir / "10-dns.yml").resolve() and edit.line == 11
    assert (inv_dir / "10-dns.yml").read_text() == before  # prepare writes nothing
    write(edit)
    after = (inv_dir / "10-dns.yml").read_text()
    assert [b for _, b in _changed(before, after)] == ["          values: ['10.1.0.9']    # old box, retiring"]
    assert (inv_dir / "10-dns.yml").stat().st_mode & 0o777 == 0o640
    assert (inv_dir / "00-base.yml").read_text() == "# base\nversion: 1\n"
    reloaded = load_inventory(inv_dir)
    assert reloaded.dns is not None
    [app] = [r for r in reloaded.dns.zones[0].records if r.name == "app"]
    assert app.values == ("10.1.0.9",) and app.ttl == 3600
    assert not list(inv_dir.glob(".*.tmp"))


def test_a_file_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    shutil.copy(FIXTURE, p)
    edit = prepare(load_inventory(p), "lab.test", "app", "A", ("10.1.0.9",))
    p.write_text(p.read_text() + "# a teammate's edit\n")
    with pytest.raises(WriteBackError, match="changed since it was read"):
        write(edit)
    assert p.read_text().endswith("# a teammate's edit\n")


def test_a_record_shared_through_an_alias_is_refused() -> None:
    text = ("version: 1\ndns:\n  zones:\n    lab.test:\n      provider: route53\n      records:\n"
            "        app: &x {type: A, values: [10.0.0.1]}\n        app2: *x\n")
    with pytest.raises(WriteBackError, match="by hand"):
        rewrite(text, "inv.yml", "lab.test", "app", "A", ("10.0.0.9",))


def test_a_record_not_in_the_file_is_refused() -> None:
    with pytest.raises(WriteBackError, match="not declared"):
        rewrite(FIXTURE.read_text(), "inv.yml", "lab.test", "nope", "A", ("10.0.0.9",))
    with pytest.raises(WriteBackError, match="not a CNAME"):
        rewrite(FIXTURE.read_text(), "inv.yml", "lab.test", "app", "CNAME", ("a.b.",))


def test_lines_ruamel_would_rewrap_elsewhere_stay_as_they_are() -> None:
    import yaml

    doc = {"version": 1, "team": {"alice": {"keys": ["ssh-ed25519 " + "A" * 120 + " alice@laptop"]}},
           "dns": {"zones": {"lab.test": {"provider": "route53", "records": {
               "m1": {"type": "A", "values": ["10.0.0.1"], "ttl": 2}}}}}}
    old = yaml.safe_dump(doc)  # folds the long key over two lines (width 80)
    assert "\n      alice@laptop\n" in old
    new, _, _ = rewrite(old, "inv.yml", "lab.test", "m1", "A", ("10.0.0.9",))
    assert _changed(old, new) == [("          - 10.0.0.1", "          - 10.0.0.9")]


# --- review of issue 21 ---------------------------------------------------------------

def test_values_edited_since_the_inventory_was_loaded_are_not_overwritten(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    shutil.copy(FIXTURE, p)
    inv = load_inventory(p)  # when the migration started: app is 10.1.0.5
    p.write_text(p.read_text().replace("['10.1.0.5']", "['10.1.0.77']"))  # a teammate's edit
    edited = p.read_text()
    with pytest.raises(WriteBackError, match=r"10\.1\.0\.77"):
        prepare(inv, "lab.test", "app", "A", ("10.1.0.9",))
    assert p.read_text() == edited


def test_crlf_mode_and_group_are_kept(tmp_path: Path) -> None:
    import os

    p = tmp_path / "inv.yml"
    crlf = FIXTURE.read_text().replace("\n", "\r\n")
    p.write_bytes(crlf.encode())
    p.chmod(0o664)
    os.chown(p, -1, 4 if os.geteuid() == 0 else os.getgid())  # group adm: not the default
    gid = p.stat().st_gid
    old = os.umask(0o022)
    try:
        edit = prepare(load_inventory(p), "lab.test", "app", "A", ("10.1.0.9",))
        write(edit)
    finally:
        os.umask(old)
    after = p.read_bytes().decode()
    assert after == crlf.replace("['10.1.0.5']", "['10.1.0.9']")  # byte for byte, CRLF kept
    st = p.stat()
    assert st.st_mode & 0o7777 == 0o664 and st.st_gid == gid


def test_a_leaf_declared_in_two_files_is_refused_before_anything(tmp_path: Path) -> None:
    d = tmp_path / "inv"
    d.mkdir()
    (d / "00-base.yml").write_text("version: 1\ndns:\n  zones:\n    lab.test:\n      provider: route53\n"
                                   "      hosted_zone_id: Z1\n      records:\n"
                                   "        app: {type: A, values: [10.0.0.1], ttl: 60}\n")
    (d / "10-copy.yml").write_text("dns:\n  zones:\n    lab.test:\n      records:\n"
                                   "        app: {type: A, values: [10.0.0.1], ttl: 60}\n")
    before = {f.name: f.read_text() for f in d.iterdir()}
    with pytest.raises(WriteBackError, match=r"10-copy\.yml"):
        prepare(load_inventory(d), "lab.test", "app", "A", ("10.0.0.9",))
    assert {f.name: f.read_text() for f in d.iterdir()} == before


def test_no_final_newline_stays_so_and_addresses_are_written_in_address_order(
        tmp_path: Path) -> None:
    text = ("version: 1\ndns:\n  zones:\n    lab.test:\n      provider: route53\n"
            "      records:\n        app: {type: A, values: [10.0.0.1], ttl: 60}")  # the last line
    new, _, _ = rewrite(text, "inv.yml", "lab.test", "app", "A", ("10.0.0.9",))
    assert new == text.replace("10.0.0.1", "10.0.0.9")
    p = tmp_path / "inv.yml"
    shutil.copy(FIXTURE, p)
    edit = prepare(load_inventory(p), "lab.test", "app", "A", ("10.1.0.10", "10.1.0.9"))
    assert edit.values == ("10.1.0.9", "10.1.0.10")  # not as strings sort (.10 before .9)
    assert "values: ['10.1.0.9', '10.1.0.10']" in edit.new_text


def test_an_absolute_cname_target_is_written_back(tmp_path: Path) -> None:
    p = tmp_path / "inv.yml"
    p.write_text("version: 1\ndns:\n  zones:\n    lab.test:\n      provider: route53\n"
                 "      records:\n        m1: {type: CNAME, value: gpu1.lab.test., ttl: 2}\n")
    edit = prepare(load_inventory(p), "lab.test", "m1", "CNAME", ("gpu2.lab.test.",))
    write(edit)
    assert "m1: {type: CNAME, value: gpu2.lab.test., ttl: 2}\n" in p.read_text()
