"""Python environments from the inventory (`host.python_envs`): built under
/opt/provision/envs, recorded there, rebuilt only when the requirement set changes. Pure.

What a run does, from the facts (`provision.facts.python_envs`, read in the one probe):

* an environment whose content-addressed directory holds a complete record of the same
  requirement set, and that its link names, is left alone: a no-op run installs nothing;
* a changed requirement set is a new directory: built beside the one in use, then the
  link switched (`provision.steps.python_env_script`); a directory of that set that is
  already complete (the previous one, after a revert) is switched back to without an install;
* the services that name the environment run from its directory, so their units change with
  it, and the services step restarts those, and only those;
* `python3 -m venv` needs ensurepip, which Debian and Ubuntu ship in `python3-venv`
  (`python3.N-venv`): installed first when an environment is to be built with pip and it is
  missing. With uv on the host, uv creates and fills the environment and needs none of it.
"""

from __future__ import annotations

import re

from provision.facts import Facts, Request
from provision.facts import python_envs as PY
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.inventory.python_envs import DIGEST_CHARS, ENVS_ROOT, PythonEnv, package_key

from .actions import Action
from .packages import PackagesStep
from .python_env_script import BuildPythonEnv


def record_diff(old: PythonEnv | None, new: PythonEnv) -> list[str]:
    """What changes from the recorded environment `old` to `new`, one phrase each:
    `+ pkg`, `- pkg`, `old -> new` per package, then the index and the python."""
    if old is None:
        return []
    before = {package_key(p): p for p in old.packages}
    after = {package_key(p): p for p in new.packages}
    out = [f"+ {after[k]}" for k in after if k not in before]
    out += [f"- {before[k]}" for k in before if k not in after]
    out += [f"{before[k]} -> {after[k]}" for k in after if k in before and before[k] != after[k]]
    if old.index_url != new.index_url:
        out.append(f"index {old.index_url} -> {new.index_url}")
    if old.extra_index_urls != new.extra_index_urls:
        out.append(f"extra indexes {', '.join(old.extra_index_urls) or 'none'} -> "
                   f"{', '.join(new.extra_index_urls) or 'none'}")
    if old.python != new.python:
        out.append(f"python {old.python} -> {new.python}")
    return out


def versions(facts: PY.PythonEnvs, name: str) -> list[str]:
    """The directories of environment `name` on the host (NAME-DIGEST), sorted."""
    pattern = re.compile(rf"^{re.escape(name)}-[0-9a-f]{{{DIGEST_CHARS}}}$")
    return sorted(d for d in facts.dirs if pattern.match(d))


def _recorded(facts: PY.PythonEnvs, dirname: str | None) -> PythonEnv | None:
    d = facts.dirs.get(dirname or "")
    return d.record.env if d is not None and d.complete and d.record is not None else None


@frozen
class PythonEnvsStep:
    inv: Inventory
    host: Host
    name: str = "python_envs"

    def request(self) -> Request:
        if not self.host.python_envs:
            return Request()
        venv = tuple(dict.fromkeys(p for e in self.host.python_envs if (p := e.venv_package)))
        return Request(dirs=(ENVS_ROOT,), packages=venv, facts=("python_envs", "apt"))

    def plan(self, facts: PY.PythonEnvs, env: PythonEnv) -> BuildPythonEnv | None:
        """The action that makes `env` current, or None when it is."""
        current = facts.links.get(env.name)
        ready = _recorded(facts, env.dirname) == env
        switch = current != env.dirname
        keep = {env.dirname, current if switch else facts.previous.get(env.name)}
        remove = tuple(d for d in versions(facts, env.name) if d not in keep)
        if ready and not switch and not remove:
            return None
        installer = "uv" if facts.uv else "pip"
        if ready and not switch:
            why = "older versions left behind"
        elif ready:
            why = "; ".join(record_diff(_recorded(facts, current), env)) or "switch"
            why = f"already built, switched to without an install: {why}"
        elif env.dirname in facts.dirs and facts.dirs[env.dirname].record is not None:
            why = "its bin/python is gone (the interpreter it was made with was removed)"
        elif env.dirname in facts.dirs:
            why = "an earlier install did not finish"
        elif current is None:
            why = "new"
        else:
            why = "; ".join(record_diff(_recorded(facts, current), env)) or "changed"
        return BuildPythonEnv(env, not ready, installer, facts.uv, current if switch else None,
                              remove, why, switch)

    def diff(self, facts: Facts) -> list[Action]:
        found = facts.get(PY.SPEC)
        builds = [a for e in self.host.python_envs if (a := self.plan(found, e)) is not None]
        # ensurepip for `-m venv`: only when pip is to build, and only what is missing
        missing = tuple(dict.fromkeys(
            p for a in builds if a.build and a.installer == "pip" and (p := a.env.venv_package)
            and not (p in facts.packages and facts.packages[p].installed)))
        first: list[Action] = []
        if missing:
            apt = PackagesStep(self.inv, self.host)
            first = apt.install(facts, missing)
        return [*first, *builds]
