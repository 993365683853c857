"""The lab's package index: an installed distribution laid out again as a wheel (what goes
where, what is left for the installer to make), its name, and the PEP 503 pages."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

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
