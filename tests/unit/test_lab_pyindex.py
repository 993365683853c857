"""The lab's package index: an installed distribution laid out again as a wheel (what goes
where, what is left for the installer to make), its name, and the PEP 503 pages."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from provision.lab import pyindex as X
from provision.lab import pyindex_shell as S

SITE = "/v/lib/python3.11/site-packages"


def test_wheel_names_compress_tags_that_are_a_product() -> None:
    assert X.wheel_filename("six-1.17.0.dist-info", ["py2-none-any", "py3-none-any"]) == \
        "six-1.17.0-py2.py3-none-any.whl"
    assert X.wheel_filename("grpcio-1.0.dist-info", [
        "cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"]) == \
        "grpcio-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    # not a product: the first tag (the WHEEL file inside keeps them all)
    assert X.wheel_filename("x-1.dist-info", ["py3-none-any", "cp311-abi3-linux_x86_64"]) == \
        "x-1-py3-none-any.whl"
    with pytest.raises(ValueError, match="names no tag"):
        X.wheel_filename("x-1.dist-info", [])


@pytest.mark.parametrize(("entry", "want"), [
    ("six.py", "six.py"),
    ("pkg/sub/mod.py", "pkg/sub/mod.py"),
    ("pkg/__pycache__/mod.cpython-311.pyc", None),
    ("six-1.dist-info/METADATA", "six-1.dist-info/METADATA"),
    ("six-1.dist-info/INSTALLER", None),
    ("six-1.dist-info/RECORD", None),
    ("six-1.dist-info/direct_url.json", None),
    ("../../../bin/tool", None),                            # an entry point: made again
    ("../../../bin/legacy-script", "six-1.data/scripts/legacy-script"),
    ("../../../share/jupyter/lab/x.json", "six-1.data/data/share/jupyter/lab/x.json"),
    ("../../../include/site/python3.11/six/h.h", "six-1.data/headers/h.h"),
    ("../../../../../etc/passwd", None),                    # outside the venv
    ("../../../../../../../../x", None),
])
def test_where_each_installed_file_goes_in_the_wheel(entry: str, want: str | None) -> None:
    assert X.arcname(entry, SITE, "/v", "six-1.data", frozenset({"tool"})) == want


def test_scripts_get_their_generic_shebang_back() -> None:
    assert X.script_text(b"#!/v/bin/python3\nimport x\n") == b"#!python\nimport x\n"
    assert X.script_text(b"\x7fELF\x02") == b"\x7fELF\x02"
    assert X.script_text(b"#!/bin/sh\necho\n") == b"#!/bin/sh\necho\n"


def test_simple_pages_link_each_wheel_with_its_digest() -> None:
    pages = X.simple_pages({"Jupyter_Server-2.0-py3-none-any.whl": "ab" * 32,
                            "six-1.17.0-py2.py3-none-any.whl": "cd" * 32})
    assert set(pages) == {"simple/index.html", "simple/jupyter-server/index.html",
                          "simple/six/index.html"}
    assert '<a href="jupyter-server/">' in pages["simple/index.html"]
    assert ('<a href="../../files/six-1.17.0-py2.py3-none-any.whl#sha256=' + "cd" * 32 + '">'
            in pages["simple/six/index.html"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_repack_lays_an_installed_distribution_out_as_a_wheel(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "demo").mkdir()
    (site / "demo" / "__pycache__").mkdir()
    (venv / "bin").mkdir()
    (venv / "share" / "demo").mkdir(parents=True)
    files = {
        site / "demo" / "__init__.py": b"X = 1\n",
        site / "demo" / "__pycache__" / "__init__.cpython-311.pyc": b"\0",
        venv / "bin" / "demo": b"#!" + str(venv).encode() + b"/bin/python\nfrom demo import main\n",
        venv / "bin" / "demo-legacy": b"#!" + str(venv).encode() + b"/bin/python3\nprint(1)\n",
        venv / "share" / "demo" / "d.txt": b"data\n",
        info / "METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Python: >=3.8\n",
        info / "WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        info / "entry_points.txt": b"[console_scripts]\ndemo = demo:main\n",
        info / "INSTALLER": b"uv\n",
    }
    for path, data in files.items():
        path.write_bytes(data)
    (info / "RECORD").write_text("".join(
        f"{'../../../' + str(p.relative_to(venv)) if not p.is_relative_to(site) else p.relative_to(site)},,\n"
        for p in files) + "demo-1.0.dist-info/RECORD,,\n")
    dists = S.venv_dists(str(venv))
    assert dists == {"demo": X.Dist("demo", "1.0", (), "demo-1.0.dist-info", requires_python=">=3.8")}
    out = tmp_path / "files"
    out.mkdir()
    name = S.repack(str(venv), dists["demo"], out)
    assert name == "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(out / name) as z:
        names = z.namelist()
        assert names == ["demo/__init__.py", "demo-1.0.data/scripts/demo-legacy",
                         "demo-1.0.data/data/share/demo/d.txt", "demo-1.0.dist-info/METADATA",
                         "demo-1.0.dist-info/WHEEL", "demo-1.0.dist-info/entry_points.txt",
                         "demo-1.0.dist-info/RECORD"]
        assert z.read("demo-1.0.data/scripts/demo-legacy") == b"#!python\nprint(1)\n"
        record = z.read("demo-1.0.dist-info/RECORD").decode().splitlines()
        # RECORD lists every other file with the hash and size of the bytes in the wheel
        for arc in names[:-1]:
            data = z.read(arc)
            assert f"{arc},sha256={_b64(data)},{len(data)}" in record
        assert record[-1] == "demo-1.0.dist-info/RECORD,,"
    stamp = (out / name).stat().st_mtime_ns
    assert S.repack(str(venv), dists["demo"], out) == name  # made once
    assert (out / name).stat().st_mtime_ns == stamp


def _wheel(d: Path, file: str, metadata: bytes | None = None, *, extra: dict[str, bytes] | None = None,
           compress: int = zipfile.ZIP_STORED) -> Path:
    """A small real wheel `d/file`, its METADATA `metadata` (default: of its name)."""
    name, version = file.split("-")[:2]
    if metadata is None:
        metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                    "Requires-Python: >=3.8\nRequires-Dist: six>=1\n"
                    "Requires-Dist: pytest; extra == 'test'\n\nA description.\n").encode()
    path = d / file
    with zipfile.ZipFile(path, "w", compress) as z:
        z.writestr(f"{name}/__init__.py", "X = 1\n")
        z.writestr(f"{name}-{version}.dist-info/METADATA", metadata)
        for arc, data in (extra or {}).items():
            z.writestr(arc, data)
        z.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return path


def test_a_wheels_dir_is_read_from_each_wheels_own_metadata(tmp_path: Path) -> None:
    w = _wheel(tmp_path, "Soup_Sieve-2.5-py3-none-any.whl",
               b"Metadata-Version: 2.1\nName: soup-sieve\nVersion: 2.5\n"
               b"Requires-Python: >=3.8\nRequires-Dist: six>=1\n"
               b"Requires-Dist: pytest; extra == 'test'\n")
    assert S.wheel_dists(str(tmp_path)) == {"soup-sieve": X.Dist(
        "soup-sieve", "2.5", ("six>=1", "pytest; extra == 'test'"), "Soup_Sieve-2.5.dist-info",
        requires_python=">=3.8", wheel=str(w), tags=("py3-none-any",))}


@pytest.mark.parametrize(("make", "error"), [
    (lambda d: (d / "x-1.0-py3-none-any.whl").symlink_to(_wheel(d.parent, "x-1.0-py3-none-any.whl")),
     "x-1.0-py3-none-any.whl: a symlink"),
    (lambda d: _wheel(d, "x-1.0.whl"), "x-1.0.whl: not a wheel's file name"),
    (lambda d: (d / "x-1.0.tar.gz").write_bytes(b"sdist"), "x-1.0.tar.gz: not a wheel's file name"),
    (lambda d: (d / "x-1.0-py3-none-any.whl").mkdir(), "x-1.0-py3-none-any.whl: not a regular file"),
    (lambda d: (d / "x-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 not a zip"),
     "not a zip archive"),
    (lambda d: _wheel(d, "x-1.0-py3-none-any.whl", b"Metadata-Version: 2.1\nName: y\nVersion: 1.0\n"),
     "its METADATA is y 1.0, its file name x 1.0"),
    (lambda d: _wheel(d, "x-1.0-py3-none-any.whl", b"garbage without headers"),
     "its METADATA has no Name or no Version"),
    (lambda d: _wheel(d, "x-1.0-py3-none-any.whl", extra={"y-1.dist-info/METADATA": b"Name: y\nVersion: 1\n"}),
     "2 \\*.dist-info/METADATA in it"),
    # a bomb: 2 MiB of zeros that deflate to a few KiB; refused at its declared size
    (lambda d: _wheel(d, "x-1.0-py3-none-any.whl", b"Name: x\nVersion: 1.0\n" + b"\0" * (2 << 20),
                      compress=zipfile.ZIP_DEFLATED), "its METADATA is 2097173 bytes"),
    (lambda d: (_wheel(d, "x-1.0-py3-none-any.whl"), _wheel(d, "x-1.1-py3-none-any.whl")),
     "a second wheel of x"),
])
def test_what_is_not_a_wheel_to_serve_is_refused_by_name(tmp_path: Path, make: Any, error: str) -> None:
    d = tmp_path / "wheels"
    d.mkdir()
    make(d)
    with pytest.raises(X.WheelError, match=error):
        S.wheel_dists(str(d))


def test_a_bomb_that_lies_about_its_size_is_read_no_further_than_it_says(tmp_path: Path) -> None:
    """Its headers say 30 bytes; the deflated stream holds 2 MiB: zipfile stops at 30 and
    the CRC refuses them (the read's own bound, METADATA_MAX + 1, is a second fence)."""
    path = _wheel(tmp_path, "x-1.0-py3-none-any.whl", b"Name: x\nVersion: 1.0\n" + b"\0" * (2 << 20),
                  compress=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    true_size = (2 << 20) + 21
    # the central directory's and the local header's uncompressed size, rewritten to 30
    for sig in (b"PK\x01\x02", b"PK\x03\x04"):
        at = 0
        while (at := data.find(sig, at)) >= 0:
            off = at + (24 if sig == b"PK\x01\x02" else 22)
            if int.from_bytes(data[off:off + 4], "little") == true_size:
                data[off:off + 4] = (30).to_bytes(4, "little")
            at += 4
    path.write_bytes(bytes(data))
    with pytest.raises(X.WheelError, match="not a zip archive a wheel is \\(Bad CRC-32"):
        S.wheel_dists(str(tmp_path))


def test_a_wheel_is_served_as_it_is_never_through_a_symlink(tmp_path: Path) -> None:
    src = tmp_path / "wheels"
    src.mkdir()
    w = _wheel(src, "demo-1.0-py3-none-any.whl")
    d = S.wheel_dists(str(src))["demo"]
    files = tmp_path / "files"
    files.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"root's file")
    (files / ".demo-1.0-py3-none-any.whl.tmp").symlink_to(victim)  # planted where it writes
    assert S.copy_wheel(d, files) == "demo-1.0-py3-none-any.whl"
    out = files / "demo-1.0-py3-none-any.whl"
    assert out.read_bytes() == w.read_bytes()  # no repack
    assert out.stat().st_mode & 0o777 == 0o644 and not out.is_symlink()
    assert victim.read_bytes() == b"root's file"
    assert [p.name for p in files.iterdir()] == [out.name]
    # the source swapped for a symlink after it was read: refused, not followed
    w.unlink()
    w.symlink_to(victim)
    with pytest.raises(X.WheelError, match="a symlink or unreadable"):
        S.copy_wheel(d, files)
    with pytest.raises(X.WheelError, match="not a wheel's file name"):
        S.copy_wheel(X.Dist("demo", "1", (), "demo-1.dist-info", wheel=str(src / "demo.whl")), files)


def test_the_hosts_tags_are_pips_for_their_python() -> None:
    tags = X.host_tags("3.11.2", ["manylinux_2_17_x86_64", "linux_x86_64"])
    for fits in ("cp311-cp311-manylinux_2_17_x86_64", "cp311-abi3-linux_x86_64",
                 "cp38-abi3-manylinux_2_17_x86_64", "py3-none-any", "py311-none-any"):
        assert fits in tags
    for unfit in ("cp312-cp312-manylinux_2_17_x86_64", "cp311-cp311-macosx_11_0_arm64",
                  "cp311-cp311-manylinux_2_17_aarch64"):
        assert unfit not in tags


def _tiny_venv(tmp_path: Path, tag: str = "py3-none-any") -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    info = site / "six-1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: six\nVersion: 1\n")
    (info / "WHEEL").write_bytes(f"Wheel-Version: 1.0\nTag: {tag}\n".encode())
    (site / "six.py").write_bytes(b"X = 1\n")
    (info / "RECORD").write_text("six.py,,\nsix-1.dist-info/METADATA,,\n"
                                 "six-1.dist-info/WHEEL,,\nsix-1.dist-info/RECORD,,\n")
    out = tmp_path / "files"
    out.mkdir()
    return venv, out


def test_repack_never_publishes_a_file_from_outside_the_venv_or_one_only_its_owner_reads(
        tmp_path: Path) -> None:
    # the index serves every lab account: before, a symlinked entry or a 0600 file was
    # read as root and published at 0644
    from provision.lab.shell import LabError

    venv, out = _tiny_venv(tmp_path)
    site = venv / "lib" / "python3.11" / "site-packages"
    secret = tmp_path / "secret"
    secret.write_bytes(b"token\n")
    secret.chmod(0o600)
    (site / "six.py").unlink()
    (site / "six.py").symlink_to(secret)
    with pytest.raises(LabError, match="outside the venv"):
        S.repack(str(venv), S.venv_dists(str(venv))["six"], out)
    (site / "six.py").unlink()
    (site / "six.py").write_bytes(b"TOKEN = 1\n")
    (site / "six.py").chmod(0o600)
    with pytest.raises(LabError, match="readable by its owner only"):
        S.repack(str(venv), S.venv_dists(str(venv))["six"], out)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("tag", ["py3-none-/../../../../etc/cron.d/x", "py3-none-a b"])
def test_a_wheel_tag_that_would_leave_the_index_directory_is_refused(tmp_path: Path,
                                                                     tag: str) -> None:
    from provision.lab.shell import LabError

    venv, out = _tiny_venv(tmp_path, tag)
    with pytest.raises(LabError, match="not letters, digits"):
        S.repack(str(venv), S.venv_dists(str(venv))["six"], out)
    assert list(out.iterdir()) == []
