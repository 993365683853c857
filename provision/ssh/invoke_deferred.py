"""paramiko without invoke's start-up cost (~0.1 s, a third of `import paramiko`).

`paramiko.config` runs `import invoke` when paramiko is first imported, only so that an
ssh_config `Match exec` line can call `invoke.run`; invoke imports `unittest.mock` and
`asyncio`. Nothing in provision parses an ssh_config outside Fabric, so `install()` lets
that one `import invoke` bind a stand-in (`Deferred`) that imports the real invoke the first
time paramiko reads anything from it: `Match exec` keeps working. Anyone else's `import
invoke` (Fabric's, for the fleet API and Python tasks) imports the real module as usual;
nothing changes when invoke or paramiko was imported first.

`provision/ssh/__init__.py` calls it (and `provision/hosts/__init__.py` imports that), so
it runs before any module of those packages imports paramiko, whatever the order of their
imports; `provision check` imports neither package and pays nothing.

How: a finder first on `sys.meta_path`, until paramiko.config is found, wraps the loader of
`paramiko.config` (found by the other finders, as it would be) so that the stand-in is in
`sys.modules` only while that module's code runs.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

MODULE = "paramiko.config"  # the module whose `import invoke` is deferred
DEFERRED = "invoke"


class Deferred(types.ModuleType):
    """Stands for invoke in paramiko.config: the real module on the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


class _Loader:
    """`loader`, with the stand-in in sys.modules while it runs paramiko.config."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        stand_in = Deferred(DEFERRED)
        if sys.modules.setdefault(DEFERRED, stand_in) is not stand_in:
            self.loader.exec_module(module)  # imported meanwhile: the real one
            return
        try:
            self.loader.exec_module(module)
        finally:
            if sys.modules.get(DEFERRED) is stand_in:
                del sys.modules[DEFERRED]

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package...
        return getattr(self.loader, name)


class _Finder:
    """Finds paramiko.config as the other finders do, once, with `_Loader`; then leaves."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != MODULE:
            return None
        with contextlib.suppress(ValueError):  # another thread's import removed it already
            sys.meta_path.remove(self)
        # Every other finder is asked here, so the import system's own loop, which skips
        # the finder after this one now that this one is gone, misses nothing.
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and DEFERRED not in sys.modules:
                    spec.loader = _Loader(spec.loader)  # type: ignore[assignment]
                return spec
        return None


def install() -> None:
    """Defer paramiko.config's `import invoke`, unless paramiko or invoke is imported already."""
    if MODULE in sys.modules or DEFERRED in sys.modules:
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
