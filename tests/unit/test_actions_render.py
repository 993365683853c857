"""Every batch action renders itself: each concrete `Action` subclass anywhere in
`provision.steps` has a sample here, and that sample gives a non-empty shell fragment and
a non-empty plan line. A new action without a sample (or without a renderer) fails here,
so adding one is one class plus its fixture cases (tests/steps)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import provision.steps
from provision.frozen import frozen
from provision.inventory.python_envs import PythonEnv
from provision.secretdata.vault import Sealed
from provision.steps import script
from provision.steps.action import Action, Described, Lib
from provision.steps.actions import (
    AptKey,
    AptSources,
    AptUpdate,
    DaemonReload,
    EnableUnit,
    EnsureGroup,
    EnsureUser,
    InstallPackages,
    LoadNewUnits,
    Mkdir,
    RemoveFile,
    RemoveTemps,
    RestartUnit,
    RetireUnit,
    RetireUser,
    SetAttrs,
    SetSysctl,
    StartUnit,
    WriteFile,
    WriteSecret,
)
from provision.steps.apt_config_check import CheckAptConfig
from provision.steps.apt_pins_actions import AptHolds, InstallPinned
from provision.steps.command import RunCommand
from provision.steps.door_script import DoorApply
from provision.steps.python_env_script import BuildPythonEnv

_write = WriteFile("/etc/x.conf", "a=1\n", old="a=0\n")
SAMPLES: dict[type[Action], Action] = {a.__class__: a for a in [
    _write,
    WriteSecret("/var/lib/provision/secrets/api/token", "token", "api", Sealed("token", b"s3cret")),
    SetAttrs("/srv/data", 0o750, "root", "team"),
    RemoveFile("/etc/old.conf", old="x\n"),
    RemoveTemps(("/etc/.provision-tmp.abc",)),
    Mkdir("/srv/data", 0o755),
    EnsureUser("alice", "/home/alice", "/bin/bash", create=True),
    RetireUser("bob"),
    InstallPackages(("htop", "tmux")),
    AptUpdate("new sources"),
    AptSources((WriteFile("/etc/apt/sources.list.d/x.sources", "Types: deb\n"),
                WriteFile("/etc/apt/keyrings/x.gpg", "key\n")),
               (AptKey("https://example.org/key.gpg", "/etc/apt/keyrings/x.gpg", "AB" * 20),),
               (), ("https://example.org/debian",)),
    SetSysctl("net.ipv4.ip_forward", "0"),
    DaemonReload(),
    LoadNewUnits(("a.service",)),
    EnableUnit("a.service"),
    StartUnit("a.service", (8000,)),
    RestartUnit("b.service", "config changed"),
    RetireUnit("c.service"),
    EnsureGroup("team", create=True, add=("alice",)),
    RunCommand("true", None, None, None, "always"),
    BuildPythonEnv(PythonEnv.of("ml", ["numpy"]), build=True, installer="pip", uv=None,
                   previous=None, remove=(), why="new"),
    DoorApply("ab" * 32, (), (("/etc/provision/door/haproxy.cfg.new", "global\n", 0o600),),
              False, (443,), (), "new"),
    InstallPinned((("cuda-toolkit", "12.4.*"),)),
    AptHolds(hold=("cuda-toolkit",)),
    CheckAptConfig("/etc/apt/apt.conf.d/50provision", "^APT::Periodic", ('APT::Periodic "1";',)),
]}


def _concrete_actions() -> set[type[Action]]:
    """Every concrete subclass of Action in the modules of provision.steps."""
    for info in pkgutil.iter_modules(provision.steps.__path__, "provision.steps."):
        importlib.import_module(info.name)
    found: set[type[Action]] = set()
    todo: list[type[Action]] = [Action]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if not inspect.isabstract(sub) and sub.__module__.startswith("provision."):
                found.add(sub)
    return found


def test_every_action_has_a_sample() -> None:
    missing = sorted(c.__qualname__ for c in _concrete_actions() - SAMPLES.keys())
    assert not missing, f"actions without a sample in {__name__} (add one): {missing}"
    assert len(SAMPLES) >= 25  # the walk really found the classes


@pytest.mark.parametrize("cls", sorted(SAMPLES, key=lambda c: c.__qualname__),
                         ids=lambda c: c.__qualname__)
def test_each_action_renders_its_fragment_and_its_line(cls: type[Action]) -> None:
    a = SAMPLES[cls]
    assert a.script().strip(), f"{cls.__qualname__}: empty shell fragment"
    assert a.describe().strip(), f"{cls.__qualname__}: empty plan line"
    assert a.plan_op() in ("+", "-", "~")
    batch = script.build([a])
    assert a.script() in batch
    for lib in a.libs:  # each library it calls is in the batch, once
        assert batch.count(lib.text()) == 1, (cls.__qualname__, lib.name)


def test_an_action_without_a_renderer_cannot_be_made() -> None:
    @frozen
    class Silent(Action):
        name: str

        def describe(self) -> str:
            return self.name

    with pytest.raises(TypeError, match="abstract"):
        Silent("x")  # type: ignore[abstract]


def test_libraries_come_once_each_in_their_order() -> None:
    batch = script.build(list(SAMPLES.values()))
    libs: dict[str, Lib] = {lib.name: lib for a in SAMPLES.values() for lib in a.libs}
    at = [batch.index(lib.text()) for lib in sorted(libs.values(), key=lambda lib: lib.order)]
    assert at == sorted(at) and len(at) == 5
    assert all(batch.count(lib.text()) == 1 for lib in libs.values())
    assert len({lib.order for lib in libs.values()}) == len(libs)  # no two share a place


def test_the_settle_check_names_the_units_started() -> None:
    batch = script.build([SAMPLES[StartUnit], SAMPLES[RestartUnit], SAMPLES[EnableUnit]])
    assert re.search(r"^provision_settled a\.service=8000 b\.service$", batch, re.M)
    assert script.build([SAMPLES[EnableUnit]]).count("provision_settled ") == 0


def test_plan_files_give_the_diffs_sources() -> None:
    from provision.commands.converge_output import _change

    assert _change("s", _write).op == "~" and _change("s", WriteFile("/n", "x\n")).op == "+"
    gone = _change("s", SAMPLES[RemoveFile])
    assert gone.op == "-" and gone.diff[:2] == ("--- a/etc/old.conf\n", "+++ /dev/null\n")
    assert isinstance(SAMPLES[AptSources], Described)
    assert [f.path for f in SAMPLES[AptSources].plan_files()] == [
        "/etc/apt/sources.list.d/x.sources", "/etc/apt/keyrings/x.gpg"]
