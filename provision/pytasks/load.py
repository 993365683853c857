"""Python tasks (I/O): import the task files a playbook names, and call a task or its check
with the host's Fabric connection. Decides nothing: whether a task runs is
`provision.steps.python_task.decide`.

Trust (docs/trust-model.md#what-a-python-task-or-a-shell-step-can-do): a task is code
run on the operator's machine. Only `plan` and `apply` call `load`, and it imports a file only when its real path (symlinks
resolved) lies inside the inventory's real directory (`root_of`) or is named with `--tasks`; the playbook
cannot name one through `..`; neither it nor a directory above it (up to that tree) may be
writable by anyone but the operator or root. The bytes imported are the bytes hashed and listed
(`Imported`): the file is read once, compiled from that text, and no bytecode is written
next to it.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import sys
import traceback
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.errors import OperationError, UsageError
from provision.frozen import frozen
from provision.inventory.model import Host
from provision.inventory.source import tree_of
from provision.task import CHECK

if TYPE_CHECKING:
    from provision.steps.python_task import Loaded, RunTask, TaskSpec

MAX_TASK_FILE = 1024 * 1024
OUTPUT_LINES = 3  # lines of a failing command's output in the recap


class TaskError(UsageError):
    """A task that cannot be loaded (exit 2, before any host is touched)."""

    prefix = ""


@frozen
class Imported:
    """A task file imported by this run: its real path and the sha256 of the bytes run."""

    path: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}


def root_of(inventory_path: str | os.PathLike[str]) -> Path:
    """The inventory's directory tree from its real path (`provision.inventory.source.
    tree_of`): a symlinked inventory file trusts its target's directory, not the link's."""
    return tree_of(inventory_path)


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def resolve(spec: TaskSpec, root: Path, allowed: Iterable[Path]) -> Path:
    """The real path of `spec`'s file, when it may be imported; TaskError says why not."""
    given = Path(spec.path)
    candidate = given if given.is_absolute() else root / given
    real = Path(os.path.realpath(candidate))
    trusted = [Path(os.path.realpath(a)) for a in allowed]
    if not (_inside(real, root) or any(real == t or _inside(real, t) for t in trusted)):
        via = f" (through a symbolic link, to {real})" if real != candidate else ""
        raise TaskError(f"{spec.where}: task: {spec.path} is outside the inventory's "
                        f"directory {root}{via}; task code is imported only from there or "
                        "from a file or directory named with --tasks PATH")
    return real


def _top(real: Path, root: Path, allowed: Iterable[Path]) -> Path:
    """The trusted directory `real` was admitted under (the inventory's, or a --tasks one)."""
    if _inside(real, root):
        return root
    tops = [Path(os.path.realpath(a)) for a in allowed]
    return next((t if t.is_dir() else t.parent for t in tops if real == t or _inside(real, t)),
                real.parent)


def _trusted_uids() -> set[int]:
    """You and root; under sudo, also the user who ran sudo (their own tree, run as root)."""
    uids = {os.getuid(), 0}
    sudo_uid = os.environ.get("SUDO_UID", "")
    if os.getuid() == 0 and sudo_uid.isdigit():
        uids.add(int(sudo_uid))
    return uids


def _loose(st: os.stat_result, directory: bool) -> str:
    """Why a task file or a directory above it lets someone else change the code, or ""."""
    if st.st_uid not in _trusted_uids():
        return f"is owned by uid {st.st_uid}, not by you or root"
    sticky = directory and st.st_mode & stat.S_ISVTX  # like /tmp: others cannot rename ours
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
        return "is writable by its group or by others"
    return ""


def check_modes(real: Path, top: Path, spec: TaskSpec, st: os.stat_result) -> None:
    """Like sshd's StrictModes: the code imported, and every directory from its own up to
    `top`, may be changed only by the operator or root; else another local user could
    swap the code run as the operator (an inventory in /tmp, a group-writable tree)."""
    why = _loose(st, directory=False)
    if why:
        raise TaskError(f"{spec.where}: task: {real} {why}; a task file may be changed only "
                        "by you or root (chmod go-w / chown it)")
    d = real.parent
    while True:
        why = _loose(os.stat(d), directory=True)
        if why:
            raise TaskError(f"{spec.where}: task: the directory {d} (above {spec.path}) {why}: "
                            "someone else could replace the task's code; chmod go-w it, or "
                            "move the inventory")
        if d == top or d == d.parent or not _inside(d, top):
            return
        d = d.parent


def _read(real: Path, spec: TaskSpec, top: Path | None = None) -> bytes:
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise TaskError(f"{spec.where}: task: cannot read {spec.path}: "
                        f"{e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise TaskError(f"{spec.where}: task: {spec.path} is not a regular file")
        check_modes(real, top or real.parent, spec, os.fstat(f.fileno()))
        opened = _opened_path(f.fileno())
        if opened is not None and opened != real:
            # a path component became a symbolic link between `resolve` and this open
            raise TaskError(f"{spec.where}: task: {spec.path} changed while it was being "
                            f"read (it now leads to {opened}); nothing was imported")
        data = f.read(MAX_TASK_FILE + 1)
    if len(data) > MAX_TASK_FILE:
        raise TaskError(f"{spec.where}: task: {spec.path} is larger than "
                        f"{MAX_TASK_FILE:,} bytes")
    return data


def _opened_path(fd: int) -> Path | None:
    """The real path of the file open on `fd` (Linux's /proc), or None where unknown."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _import(real: Path, data: bytes, spec: TaskSpec) -> types.ModuleType:
    digest = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    name = f"provision_task_{real.stem if real.stem.isidentifier() else 'file'}_{digest}"
    try:
        code = compile(data, str(real), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        at = f"{real}:{line}:{getattr(e, 'offset', 0) or 1}" if line else str(real)
        raise TaskError(f"{at}: not valid Python ({getattr(e, 'msg', e)}); named by "
                        f"{spec.where}") from None
    module = types.ModuleType(name)
    module.__file__ = str(real)
    sys.modules[name] = module  # dataclasses and pickling look their module up there
    try:
        exec(code, module.__dict__)
    except (Exception, SystemExit) as e:
        sys.modules.pop(name, None)
        raise TaskError(f"{spec.where}: task: importing {spec.path} raised "
                        f"{type(e).__name__}: {e}{_origin(e, str(real))}") from None
    return module


def load(tasks: Iterable[TaskSpec], root: Path, allowed: Iterable[Path] = ()
         ) -> tuple[dict[str, Loaded], list[Imported]]:
    """Import every task's file (each once) and find its function and check. Also imports
    Fabric, which the tasks' connections need: here, in the main thread, before any host's
    thread (two threads' first imports of a package can meet half-initialised modules)."""
    allowed = tuple(allowed)
    tasks = tuple(tasks)
    for a in allowed:
        if not Path(a).exists():
            raise TaskError(f"--tasks {a}: no such file or directory")
    if not tasks:
        return {}, []
    from provision.steps.python_task import Loaded

    from . import fabric  # noqa: F401  # fabric (~0.15 s): only for Python tasks
    modules: dict[Path, types.ModuleType] = {}
    imported: list[Imported] = []
    code: dict[str, Loaded] = {}
    for spec in tasks:
        real = resolve(spec, root, allowed)
        if real not in modules:
            data = _read(real, spec, _top(real, root, allowed))
            modules[real] = _import(real, data, spec)
            imported.append(Imported(str(real), hashlib.sha256(data).hexdigest()))
        module = modules[real]
        fn = module.__dict__.get(spec.function)
        if fn is None:
            names = sorted(n for n, v in module.__dict__.items()  # its own, not imported ones
                           if isinstance(v, types.FunctionType) and not n.startswith("_")
                           and v.__module__ == module.__name__)
            close = difflib.get_close_matches(spec.function, names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TaskError(f"{spec.where}: task: {spec.path} has no function "
                            f"'{spec.function}'{hint} (functions: {', '.join(names) or 'none'})")
        if not callable(fn):
            raise TaskError(f"{spec.where}: task: {spec.path}:{spec.function} is not a function")
        check = getattr(fn, CHECK, None)
        if check is not None and not callable(check):
            raise TaskError(f"{spec.where}: task: {spec.ref}.check is not a function")
        code[spec.label] = Loaded(fn, check, str(real))
    return code, imported


# --- calling tasks (in a host's thread) --------------------------------------------------

def task_connection(chain: Any, remote: Any) -> Any:
    """The `fabric.Connection` a task gets, over the host's open link
    (`provision.pytasks.fabric`)."""
    from . import fabric  # fabric (~0.15 s): `load` imported it first, in the main thread

    return fabric.connection(chain, remote)


class TaskFailed(OperationError):
    """A task or its check failed on this host (the message is the recap's line)."""


@dataclass
class Called:
    """What a call returned, or why it failed (one line for the recap)."""

    value: Any = None
    error: str = ""


def call(fn: Callable[[Any, Host], Any], c: Any, host: Host, what: str) -> Called:
    """`fn(c, host)`; an exception becomes its recap line (never raised)."""
    try:
        return Called(fn(c, host))
    except (Exception, SystemExit) as e:  # sys.exit() in a task fails its host, not the run
        return Called(error=f"{what}: {_failure(e, getattr(fn, '__code__', None))}")


def check(loaded: Loaded, c: Any, host: Host, ref: str) -> Called:
    """The task's check: a bool, or an error."""
    assert loaded.check is not None
    got = call(loaded.check, c, host, f"check of {ref}")
    if not got.error and not isinstance(got.value, bool):
        got = Called(error=f"check of {ref} returned {type(got.value).__name__} "
                           f"{_brief(got.value)}, not True (done) or False")
    return got


def run(task: RunTask, c: Any, host: Host) -> str:
    """Run the task, then (when it has a check) verify it is done: "" or the recap line."""
    got = call(task.loaded.fn, c, host, f"task {task.ref}")
    if got.error:
        return got.error
    if task.loaded.check is None:
        return ""
    after = check(task.loaded, c, host, task.ref)
    if after.error:
        return after.error
    if after.value is not True:
        return (f"task {task.ref} ran, but its check still says not done: the next apply "
                "would run it again")
    return ""


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _failure(e: BaseException, code: Any) -> str:
    """An invoke UnexpectedExit: the command, its exit status and last lines of output;
    anything else: the exception and where in the task file it was raised."""
    result = getattr(e, "result", None)
    if result is not None and hasattr(result, "exited") and hasattr(result, "command"):
        out = (result.stderr or "").strip() or (result.stdout or "").strip()
        tail = out.splitlines()[-OUTPUT_LINES:]
        return (f"{result.command!r} exited {result.exited}"
                + (": " + " / ".join(tail) if tail else ""))
    where = _origin(e, getattr(code, "co_filename", ""))
    return f"{type(e).__name__}: {e}{where}"


def _origin(e: BaseException, filename: str) -> str:
    """` (FILE:LINE)`: the innermost frame of the exception in `filename`."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
