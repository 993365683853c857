"""A non-editable wheel carries the templates, playbooks and example inventory, and renders."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_wheel_ships_templates_and_renders(tmp_path: Path) -> None:
    uv = Path(sys.executable).parent / "uv"  # installed by `make` beside the interpreter
    subprocess.run([str(uv), "build", "-q", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("provision-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "provision/_templates/ssh_config.j2" in names
    assert "provision/_inventories/example.yml" in names
    # no bytecode, nor the compiled templates the source tree keeps beside it
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".cache"))], names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    out = tmp_path / "out"
    example = str(site / "provision/_inventories/example.yml")
    # Drop the editable-install finder so nothing can come from the source tree.
    code = ("import sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f)];"
            f"import provision, provision.commands.render as r;"
            f"assert provision.__file__.startswith({str(site)!r}), provision.__file__;"
            f"assert r.__file__.startswith({str(site)!r}), r.__file__;"
            f"from provision.cli import main; sys.argv=['provision','render','-i',{example!r},'--out',{str(out)!r}];"
            "main()")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                   env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert "ProxyJump jump" in (out / "ssh_config").read_text()
    assert (out / "gpu1/etc/iptables/rules.v6").is_file()


def test_every_subpackage_is_listed_in_pyproject() -> None:
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "provision").rglob("__init__.py")}
    assert on_disk <= listed, sorted(on_disk - listed)
