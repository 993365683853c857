"""Playbooks: `playbooks/*.yml` name an ordered list of steps and the hosts they run on.
Pure apart from reading the playbook file.

    hosts: role:gpu-server        # all | a host name | role:NAME (or a list of them)
    steps:
      - users                     # a built-in step (provision.steps.registry.STEPS)
      - run: nvidia-smi -pm 1     # a shell step (provision.steps.command)
        unless: nvidia-smi -q | grep -q 'Persistence Mode *: Enabled'
      - task: tasks/cuda.py:install_cuda   # a Python task (provision.steps.python_task)

Loading is strict (unknown keys and steps are errors that point at file:line:column).
Pure apart from reading the playbook file: a task's code is imported only by `plan` and
`apply` (`provision.pytasks.load`), never here. The steps themselves:
`provision.steps.step`; the two custom kinds: docs/playbook-steps.md.
"""

from __future__ import annotations

import dataclasses
import difflib
import keyword
import os
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from provision.errors import UsageError
from provision.frozen import frozen
from provision.inventory.fields import check_name
from provision.inventory.model import Host, Inventory
from provision.localfile import file_kind
from provision.steps import command as run_step
from provision.steps import python_task
from provision.steps.command import ShellSpec
from provision.steps.python_task import Loaded, TaskSpec
from provision.steps.registry import STEPS
from provision.text import printable, unsafe

if TYPE_CHECKING:
    from provision.steps.step import Step

DEFAULT_PLAYBOOK = "bootstrap-gpu-server"


KEYS = ("name", "description", "hosts", "steps")
# the keys of a custom step entry, by the key that says its kind
STEP_KEYS = {"run": ("run", "name", "creates", "unless", "sudo"), "task": ("task", "name")}
MAX_COMMAND = 16 * 1024  # an unless: travels as one argument of the probe's exec (Linux: 128 KiB)
# ...and every guard of the playbook travels in the probe's one SSH command line, which the
# host's shell receives as ONE argument (`sh -c LINE`): Linux refuses more than 128 KiB
# there (E2BIG), whatever the number of guards. The other facts' arguments and the quoting
# need room too.
MAX_GUARDS_TOTAL = 64 * 1024
MAX_PATH = 4096  # a creates: path (Linux's PATH_MAX)
# A playbook names steps and hosts: a few hundred bytes. The cap keeps a wrong path (a log,
# /dev/zero behind a symlink) from being read whole.
MAX_PLAYBOOK_BYTES = 1024 * 1024
MAX_DESCRIPTION = 1000


class PlaybookError(UsageError):
    """A playbook that cannot be used; str() is `file:line:col: field: message`."""

    prefix = ""


@frozen
class Playbook:
    name: str
    source: str
    hosts: tuple[str, ...]
    steps: tuple[str, ...]  # step names: built-in ones, and the labels of `custom`
    description: str = ""
    custom: Mapping[str, ShellSpec | TaskSpec] = field(default_factory=dict)
    code: Mapping[str, Loaded] = field(default_factory=dict)  # task label -> imported code

    @property
    def tasks(self) -> tuple[TaskSpec, ...]:
        """The Python task steps (whose code `plan` and `apply` import)."""
        return tuple(s for s in self.custom.values() if isinstance(s, TaskSpec))

    def with_code(self, code: Mapping[str, Loaded]) -> Playbook:
        return dataclasses.replace(self, code=dict(code))

    def select(self, inv: Inventory, patterns: tuple[str, ...] = ()) -> tuple[Host, ...]:
        """The playbook's hosts, narrowed to `patterns` when given. KeyError on a bad pattern."""
        mine = tuple(h for h in (*inv.bastions, *inv.hosts)  # the order they are applied in
                     if any(_matches(p, h) for p in self.hosts))
        if not patterns:
            return mine
        return tuple(h for h in inv.select(list(patterns)) if h in mine)

    def build(self, inv: Inventory, host: Host) -> list[Step]:
        out: list[Step] = []
        for s in self.steps:
            spec = self.custom.get(s)
            if spec is None:
                out.append(STEPS[s](inv, host))
            elif isinstance(spec, ShellSpec):
                out.append(run_step.build(spec, inv, host))
            else:
                out.append(python_task.build(spec, self.code.get(s), inv, host))
        return out


def _matches(pattern: str, host: Host) -> bool:
    if pattern == "all":
        return not host.is_bastion
    if pattern == "bastions":
        return host.is_bastion
    if pattern.startswith("role:"):
        return pattern[5:] in host.roles
    return pattern == host.name


def find(name: str) -> tuple[str, str]:
    """(source label, text) of a playbook: a path to a .yml file, or a shipped playbook name."""
    p = Path(name)
    if p.suffix in (".yml", ".yaml") or "/" in name:
        return str(p), read_file(p)
    shipped = files("provision._playbooks")
    candidate = shipped / f"{name}.yml"
    if not candidate.is_file():
        known = shipped_names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise PlaybookError(f"unknown playbook '{name}'{hint} (shipped: {', '.join(known)}; "
                            "or give a path to a .yml file)")
    return f"playbooks/{name}.yml", candidate.read_text()


def shipped_names() -> list[str]:
    """The playbooks shipped with provision, by name."""
    return sorted(str(f.name)[:-4] for f in files("provision._playbooks").iterdir()
                  if str(f.name).endswith(".yml"))


def _not_a_file(p: Path, mode: int) -> PlaybookError:
    return PlaybookError(f"{p}: {file_kind(mode)}, not a regular file: --playbook takes a "
                         f"playbook file (a regular .yml file of UTF-8 text, at most "
                         f"{MAX_PLAYBOOK_BYTES // (1024 * 1024)} MiB) or the name of a "
                         f"shipped playbook ({', '.join(shipped_names())})")


def read_file(p: Path) -> str:
    """A playbook file's text: a regular file (a FIFO or device is refused without blocking
    on it), at most MAX_PLAYBOOK_BYTES, UTF-8. Raises PlaybookError saying which."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PlaybookError(f"{p}: no such playbook file") from None
    except OSError as e:
        try:  # a socket cannot be opened (ENXIO): say what it is, not only the errno
            mode = os.stat(p).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise _not_a_file(p, mode) from None
        raise PlaybookError(f"{p}: cannot read the playbook: {e.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_a_file(p, mode)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_PLAYBOOK_BYTES + 1)
        except OSError as e:
            raise PlaybookError(f"{p}: cannot read the playbook: {e.strerror}") from None
    if len(data) > MAX_PLAYBOOK_BYTES:
        raise PlaybookError(f"{p}: too large for a playbook (more than "
                            f"{MAX_PLAYBOOK_BYTES:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line, col = before.count(b"\n") + 1, e.start - (before.rfind(b"\n") + 1) + 1
        raise PlaybookError(f"{p}:{line}:{col}: not UTF-8 text (byte 0x{data[e.start]:02x})") from None


def load(name: str) -> Playbook:
    source, text = find(name)
    return parse(text, source, default_name=Path(source).stem)


def parse(text: str, source: str, default_name: str = "playbook") -> Playbook:
    def err(node: Any, field: str, message: str) -> PlaybookError:
        m = node.start_mark if node is not None else None
        where = f"{source}:{m.line + 1}:{m.column + 1}" if m else f"{source}:1:1"
        return PlaybookError(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    for n, line in enumerate(text.split("\n"), 1):
        # as in an inventory: what a reviewer reads is what the file says
        bad = unsafe(line.replace("\t", " ").rstrip("\r"))
        if bad is not None:
            raise PlaybookError(f"{source}:{n}:{line.index(bad) + 1}: character "
                                f"{printable(bad)!r} is not allowed in a playbook (control, "
                                "format and invisible characters)")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise PlaybookError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise PlaybookError(f"{source}:1:1: nested too deeply for a playbook") from None
    if not isinstance(root, yaml.MappingNode):
        raise err(root, "", "a playbook is a mapping with 'hosts' and 'steps'")
    fields: dict[str, tuple[Any, Any]] = {}
    for k, v in root.value:
        key = k.value if isinstance(k, yaml.ScalarNode) else None
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise err(k, str(key), f"unknown key{hint} (allowed: {', '.join(KEYS)})")
        if key in fields:
            raise err(k, key, "duplicate key")
        fields[key] = (k, v)

    def text_ok(node: Any, field: str) -> None:
        """A "\\u200b" escape keeps the file clean: its value is checked too."""
        bad = unsafe(node.value)
        if bad is not None:
            raise err(node, field, f"character {printable(bad)!r} is not allowed (control, "
                      "format and invisible characters)")

    def strings(key: str, allow_scalar: bool) -> list[tuple[str, Any]]:
        _, v = fields[key]
        if isinstance(v, yaml.ScalarNode) and allow_scalar and v.tag.endswith(":str"):
            text_ok(v, key)
            return [(v.value, v)]
        if not isinstance(v, yaml.SequenceNode) or not v.value or not v.tag.endswith(":seq"):
            raise err(v, key, "a non-empty list of names" + (" (or one name)" if allow_scalar else ""))
        out = []
        for i, item in enumerate(v.value):
            if not (isinstance(item, yaml.ScalarNode) and item.tag.endswith(":str")) or not item.value:
                raise err(item, f"{key}[{i}]", "must be a name")
            text_ok(item, f"{key}[{i}]")
            out.append((item.value, item))
        return out

    for required in ("hosts", "steps"):
        if required not in fields:
            raise err(root, required, "required field is missing")
    steps, custom = _steps(fields["steps"][1], err, text_ok, source)
    hosts = strings("hosts", allow_scalar=True)
    for i, (h, node) in enumerate(hosts):
        if h != "all" and not (h.startswith("role:") and len(h) > 5) and (
                any(c.isspace() for c in h) or ":" in h):
            raise err(node, f"hosts[{i}]", f"'{h}' is not a host selector "
                      "(all, bastions, a host name, or role:NAME)")
    name, description = default_name, ""
    for key in ("name", "description"):
        if key in fields:
            v = fields[key][1]
            if not (isinstance(v, yaml.ScalarNode) and v.tag.endswith(":str")):
                raise err(v, key, "must be a string")
            if key == "name":
                try:  # it titles the plan and the recap
                    name = check_name(v.value)
                except ValueError as e:
                    raise err(v, key, str(e)) from None
            else:
                text_ok(v, key)
                if len(v.value) > MAX_DESCRIPTION:
                    raise err(v, key, f"at most {MAX_DESCRIPTION} characters")
                description = v.value
    return Playbook(name=name, source=source, hosts=tuple(h for h, _ in hosts),
                    steps=steps, description=description, custom=custom)


Err = Callable[[Any, str, str], PlaybookError]


def _steps(v: Any, err: Err, text_ok: Callable[[Any, str], None],
           source: str) -> tuple[tuple[str, ...], dict[str, ShellSpec | TaskSpec]]:
    """The `steps:` list: built-in names, task references, `run:`/`task:` mappings."""
    if not isinstance(v, yaml.SequenceNode) or not v.value or not v.tag.endswith(":seq"):
        raise err(v, "steps", "a non-empty list of names")
    labels: list[str] = []
    custom: dict[str, ShellSpec | TaskSpec] = {}
    guards = 0
    for i, item in enumerate(v.value):
        at = f"steps[{i}]"
        spec: ShellSpec | TaskSpec | None = None
        if isinstance(item, yaml.ScalarNode) and item.tag.endswith(":str") and item.value:
            text_ok(item, at)
            if item.value in STEPS:
                label = item.value
            elif ".py:" in item.value:
                spec = _task(item, item.value, None, at, err, source)
                label = spec.label
            else:
                close = difflib.get_close_matches(item.value, list(STEPS), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise err(item, at, f"unknown step '{item.value}'{hint} (steps: "
                          f"{', '.join(STEPS)}; or a task FILE.py:FUNCTION, or a mapping "
                          "with run: or task:)")
        elif isinstance(item, yaml.MappingNode):
            spec = _custom(item, i, err, text_ok, source)
            label = spec.label
        else:
            raise err(item, at, "must be a step name, or a mapping with run: or task:")
        if label in labels:
            raise err(item, "steps", f"a step is listed twice ('{label}')")
        if isinstance(spec, ShellSpec):
            guards += sum(len(shlex.quote(g)) + 64 for g in (spec.creates, spec.unless) if g)
            if guards > MAX_GUARDS_TOTAL:
                raise err(item, at, f"the playbook's creates:/unless: guards are too long in "
                          f"all (at most {MAX_GUARDS_TOTAL:,} characters together, quoted: "
                          "they travel in the probe's one command line); move long ones "
                          "into a script on the host")
        labels.append(label)
        if spec is not None:
            custom[label] = spec
    return tuple(labels), custom


def _custom(item: Any, i: int, err: Err, text_ok: Callable[[Any, str], None],
            source: str) -> ShellSpec | TaskSpec:
    at = f"steps[{i}]"
    keys: dict[str, Any] = {}
    for k, val in item.value:
        key = k.value if isinstance(k, yaml.ScalarNode) else None
        if key in keys:
            raise err(k, f"{at}.{key}", "duplicate key")
        keys[str(key)] = (k, val)
    kinds = [k for k in STEP_KEYS if k in keys]
    if len(kinds) != 1:
        raise err(item, at, "a custom step has exactly one of run: (a shell command) or "
                  "task: (FILE.py:FUNCTION)")
    kind = kinds[0]
    allowed = STEP_KEYS[kind]
    for key, (k, _) in keys.items():
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise err(k, f"{at}.{key}", f"unknown key{hint} (a {kind}: step allows: "
                      f"{', '.join(allowed)})")

    def string(key: str) -> tuple[str, Any] | None:
        if key not in keys:
            return None
        node = keys[key][1]
        if not (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str")):
            raise err(node, f"{at}.{key}", "must be a string")
        return node.value, node

    name = None
    if (got := string("name")) is not None:
        try:  # it labels the step's lines in the plan and the recap
            name = check_name(got[0])
        except ValueError as e:
            raise err(got[1], f"{at}.name", str(e)) from None
        if name in STEPS:
            raise err(got[1], f"{at}.name", f"'{name}' is the name of a built-in step")
    if kind == "task":
        ref = string("task")
        assert ref is not None
        text_ok(ref[1], f"{at}.task")
        return _task(ref[1], ref[0], name, f"{at}.task", err, source)
    run = string("run")
    assert run is not None
    command = _command(run, f"{at}.run", err)
    unless = string("unless")
    creates = string("creates")
    if creates is not None:
        text_ok(creates[1], f"{at}.creates")
        if len(creates[0]) > MAX_PATH:
            raise err(creates[1], f"{at}.creates", f"at most {MAX_PATH:,} characters (a path)")
        if not creates[0].startswith("/") or creates[0] != creates[0].strip():
            raise err(creates[1], f"{at}.creates", "an absolute path (the step is skipped "
                      "when it exists on the host)")
    sudo = True
    if "sudo" in keys:
        node = keys["sudo"][1]
        if not (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":bool")):
            raise err(node, f"{at}.sudo", "true (run as root, the default) or false (as the "
                      "login user)")
        sudo = node.value.lower() in ("true", "yes", "on", "y")
    return ShellSpec(label=name or f"run[{i}]", command=command,
                     creates=None if creates is None else creates[0],
                     unless=None if unless is None else _command(unless, f"{at}.unless", err),
                     sudo=sudo, where=_where(item, source))


def _command(got: tuple[str, Any], at: str, err: Err) -> str:
    """A shell command: one line or several (a YAML block); no other control character."""
    value, node = got
    if not value.strip():
        raise err(node, at, "an empty command (give the shell command to run)")
    if len(value) > MAX_COMMAND:
        raise err(node, at, f"at most {MAX_COMMAND:,} characters")
    bad = unsafe(value.replace("\n", " ").replace("\t", " "))
    if bad is not None:
        raise err(node, at, f"character {printable(bad)!r} is not allowed (control, format "
                  "and invisible characters; newlines and tabs are)")
    return value


def _task(node: Any, ref: str, name: str | None, at: str, err: Err, source: str) -> TaskSpec:
    """`FILE.py:FUNCTION`: the file relative to the inventory's directory (or absolute, for
    one named with --tasks), never through `..`."""
    path, _, function = ref.rpartition(":")
    if not path.endswith(".py") or path == ".py":
        raise err(node, at, f"'{ref}' is not a task (FILE.py:FUNCTION, the file relative to "
                  "the inventory's directory)")
    if not function.isidentifier() or keyword.iskeyword(function):
        raise err(node, at, f"'{function}' is not a Python function name")
    parts = path.split("/")
    if ".." in parts or any(c.isspace() for c in path) or "\\" in path:
        raise err(node, at, f"'{path}': a task file is named by a path inside the "
                  "inventory's directory, without '..' (or absolute, and given with --tasks)")
    return TaskSpec(label=name or ref, path=path, function=function, where=_where(node, source))


def _where(node: Any, source: str) -> str:
    m = node.start_mark
    return f"{source}:{m.line + 1}:{m.column + 1}"


T = TypeVar("T")


def waves(items: Sequence[T], host_of: Callable[[T], Host]) -> list[list[T]]:
    """Apply order: bastions first, outermost before the ones behind them, then every host.

    A host's confirmation (and its team's logins) go through its bastions, so a bastion's
    sshd and firewall must have settled before the hosts behind it change.
    """
    bastions = sorted({len(host_of(i).jump_chain) for i in items if host_of(i).is_bastion})
    out = [[i for i in items if host_of(i).is_bastion and len(host_of(i).jump_chain) == depth]
           for depth in bastions]
    hosts = [i for i in items if not host_of(i).is_bastion]
    return [*out, hosts] if hosts else out
