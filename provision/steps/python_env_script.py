"""The python env action and its shell for the batch (pure): build an environment beside
the one in use, then switch its link atomically (`templates/steps/python_env.sh`).

The build happens in the environment's own content-addressed directory, because a
virtualenv cannot be moved (its scripts name its path); the switch is two renames of
symlinks (`.previous-NAME`, then `NAME`). A failed build exits the batch before the
switch and before any service is restarted: the previous environment and its services
keep running.
"""

from __future__ import annotations

import base64
import functools
from importlib.resources import files
from shlex import quote
from urllib.parse import urlsplit

from provision.facts.python_envs import record_text
from provision.frozen import frozen
from provision.inventory.python_envs import ENVS_ROOT, PREVIOUS, PythonEnv

from .action import Action, Lib


@functools.cache
def lib() -> str:
    return (files("provision._templates") / "steps" / "python_env.sh").read_text("utf-8")


# the library its fragment calls (fourth of the batch's libraries)
PYENV = Lib(40, "python-env", lib)


@frozen
class BuildPythonEnv(Action):
    """Make `env` the current environment of its name: build it (unless a complete
    directory of it is there), switch `NAME` to it (the old target becomes `.previous-NAME`),
    remove the older directories in `remove`."""

    env: PythonEnv
    build: bool
    installer: str  # pip | uv
    uv: str | None  # uv's path on the host, when the installer is uv
    previous: str | None  # NAME's current target, kept as .previous-NAME
    remove: tuple[str, ...]  # directory names under ENVS_ROOT
    why: str
    switch: bool = True  # False: NAME already names it (only `remove` to do)

    libs = (PYENV,)

    def script(self) -> str:
        return snippet(self)

    def describe(self) -> str:
        if self.build:
            what = (f"build {self.env.path} with {self.installer} "
                    f"({', '.join(self.env.packages)} from {self.env.index_url})")
        elif self.switch:
            what = f"switch {self.env.link} to {self.env.dirname}"
        else:
            return f"python env {self.env.name}: remove {', '.join(self.remove)} ({self.why})"
        gone = f"; remove {', '.join(self.remove)}" if self.remove else ""
        return f"python env {self.env.name}: {what} ({self.why}){gone}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def install_args(env: PythonEnv) -> list[str]:
    """The installer's index options: plain-http indexes (allowed only to loopback and
    private addresses, `index_problem`) are named trusted, or pip ignores them."""
    args = ["--index-url", env.index_url]
    for u in env.extra_index_urls:
        args += ["--extra-index-url", u]
    hosts = [urlsplit(u).netloc for u in (env.index_url, *env.extra_index_urls)
             if u.startswith("http://")]
    for h in dict.fromkeys(hosts):
        args += ["--trusted-host", h]
    return args


def snippet(a: BuildPythonEnv) -> str:
    e = a.env
    root = quote(ENVS_ROOT)
    lines = [f"provision_safe_path {root}", f"mkdir -p {root}", f"chmod 0755 {root}"]
    if a.build:
        call = ["provision_pyenv_build", e.name, e.path, e.python, a.uv or "",
                _b64(e.requirements_txt()), _b64(record_text(e, a.installer)), *install_args(e)]
        lines.append(f"if ! {' '.join(quote(x) for x in call)}; then exit 1; fi")
    if a.switch and a.previous and a.previous != e.dirname:
        lines.append(f"provision_pyenv_link {root} {quote(PREVIOUS + e.name)} {quote(a.previous)}")
    if a.switch:
        lines.append(f"provision_pyenv_link {root} {quote(e.name)} {quote(e.dirname)}")
    lines += [f"rm -rf -- {quote(ENVS_ROOT + '/' + d)}" for d in a.remove]
    return "\n".join(lines)
