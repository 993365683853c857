"""The Python uv builds an environment with is the host's own (`python3` from the OS, as the
inventory says), found the way provision's build runs uv (`provision_pyenv_clean_env`).

uv's defaults prefer an interpreter uv installed itself (under the home of whoever runs it:
root's, mode 0700) and download one when the host has none: an environment made from
root's copy passes the build's own check (run as root) and then cannot start a member's
server, and a download comes from neither the OS nor the inventory's index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision.steps.python_env_script import lib

UV = Path(sys.executable).parent / "uv"


@pytest.mark.skipif(not UV.exists() or not Path("/usr/bin/python3").exists(),
                    reason="needs uv beside the test's Python and an OS python3")
def test_uv_builds_from_the_os_python_not_one_in_roots_home(tmp_path: Path) -> None:
    # what `uv python install` leaves in a home: a managed CPython (here the OS's, linked)
    real = Path(os.path.realpath("/usr/bin/python3"))
    version = subprocess.run([real, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    managed = tmp_path / f".local/share/uv/python/cpython-{version}-linux-x86_64-gnu/bin"
    managed.mkdir(parents=True)
    for name in ("python", "python3", real.name):
        (managed / name).symlink_to(real)
    # and a project's .venv in the directory the batch runs from
    project = tmp_path / "project"
    subprocess.run([real, "-m", "venv", "--without-pip", project / ".venv"], check=True)
    env_dir = tmp_path / "env"
    # the build's own command line (templates/steps/python_env.sh)
    script = (f"{lib()}\n( provision_pyenv_clean_env; {UV} venv --quiet --python python3 "
              f"{env_dir} )")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "UV_PYTHON_PREFERENCE": "managed"}
    out = subprocess.run(["sh", "-c", script], env=env, cwd=project,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    cfg = dict(line.split(" = ", 1) for line in (env_dir / "pyvenv.cfg").read_text().splitlines()
               if " = " in line)
    assert cfg["home"] == str(real.parent), cfg
