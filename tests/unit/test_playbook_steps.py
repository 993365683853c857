"""Custom steps in playbooks: the strict schema of `run:` and `task:` entries (file:line:col,
exit 2), and the trust model of Python tasks: `check` and `render` never import task code,
`plan`/`apply` import it only from the inventory's tree or a `--tasks` path, and say which
files they imported.

Every inventory here points at 127.0.0.1 port 1 (nothing listens; loopback only)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from provision.cli import main
from provision.playbook import PlaybookError, parse
from provision.steps.command import ShellSpec
from provision.steps.python_task import TaskSpec

INVENTORY = """version: 1
defaults: {user: admin, identity_file: ./id_ed25519, known_hosts: ./known_hosts}
hosts:
  gpu1: {address: 127.0.0.1, port: 1, ssh_from: [10.0.0.0/8]}
"""

# Imported, it leaves a file next to itself: proof that it was imported, read on disk.
TASKS = """from pathlib import Path
from provision.task import task

Path(__file__).with_name("IMPORTED").write_text("yes")


def done(c, host):
    return True


@task(check=done)
def install(c, host):
    raise AssertionError("never called in these tests")


def install_other(c, host):
    pass
"""


def test_custom_steps_parse_to_specs() -> None:
    pb = parse("""hosts: all
steps:
  - users
  - run: nvidia-smi -pm 1
    unless: nvidia-smi -q | grep -q Enabled
  - name: cuda-tar
    run: |
      tar xf /srv/cuda.tgz -C /opt
      ldconfig
    creates: /opt/cuda
    sudo: false
  - tasks/cuda.py:install_cuda
  - {task: /srv/shared/gpu.py:tune, name: tune}
""", "pb.yml")
    assert pb.steps == ("users", "run[1]", "cuda-tar", "tasks/cuda.py:install_cuda", "tune")
    assert pb.custom["run[1]"] == ShellSpec("run[1]", "nvidia-smi -pm 1", None,
                                            "nvidia-smi -q | grep -q Enabled", True, "pb.yml:4:5")
    assert pb.custom["cuda-tar"] == ShellSpec("cuda-tar", "tar xf /srv/cuda.tgz -C /opt\nldconfig\n",
                                              "/opt/cuda", None, False, "pb.yml:6:5")
    assert pb.custom["tasks/cuda.py:install_cuda"] == TaskSpec(
        "tasks/cuda.py:install_cuda", "tasks/cuda.py", "install_cuda", "pb.yml:12:5")
    assert [t.label for t in pb.tasks] == ["tasks/cuda.py:install_cuda", "tune"]


@pytest.mark.parametrize(("steps", "message"), [
    ("[{run: ''}]", "x.yml:2:15: steps[0].run: an empty command"),
    ("[{run: '   '}]", "x.yml:2:15: steps[0].run: an empty command"),
    ("[{run: ls, unless: ''}]", "x.yml:2:27: steps[0].unless: an empty command"),
    ("[{run: ls, create: /x}]", "x.yml:2:19: steps[0].create: unknown key; did you mean 'creates'?"),
    ("[{task: 't.py:f', creates: /x}]", "x.yml:2:26: steps[0].creates: unknown key (a task: step "
                                        "allows: task, name)"),
    ("[{run: ls, task: 't.py:f'}]", "x.yml:2:9: steps[0]: a custom step has exactly one of run:"),
    ("[{name: x}]", "x.yml:2:9: steps[0]: a custom step has exactly one of run:"),
    ("[{run: ls, creates: relative/x}]", "x.yml:2:28: steps[0].creates: an absolute path"),
    ("[{run: ls, sudo: 'no'}]", "x.yml:2:25: steps[0].sudo: true (run as root, the default) or false"),
    ("[{run: ls, name: users}]", "steps[0].name: 'users' is the name of a built-in step"),
    ("[{run: ls, name: 'a b'}]", "x.yml:2:25: steps[0].name: a name must not contain whitespace"),
    ('[{run: "ls\\e[2J"}]', "x.yml:2:15: steps[0].run: character '\\\\x1b' is not allowed"),
    ("[{run: [ls]}]", "x.yml:2:15: steps[0].run: must be a string"),
    ("[{run: ls, unless: " + "x" * 16385 + "}]", "steps[0].unless: at most 16,384 characters"),
    ("[{run: ls, creates: /" + "x" * 4096 + "}]", "steps[0].creates: at most 4,096 characters"),
    ("[" + ", ".join(f"{{run: ls, name: s{n}, unless: '{'y' * 16000}'}}" for n in range(5)) + "]",
     "x.yml:2:64141: steps[4]: the playbook's creates:/unless: guards are too long in all"),
    ("[{run: a, name: s}, {run: b, name: s}]", "x.yml:2:28: steps: a step is listed twice ('s')"),
    ("[tasks/a.py:f, tasks/a.py:f]", "steps: a step is listed twice ('tasks/a.py:f')"),
    ("[tasks/../../etc/evil.py:f]", "x.yml:2:9: steps[0]: 'tasks/../../etc/evil.py': a task file "
                                    "is named by a path inside the inventory's directory, without '..'"),
    ("[{task: '../t.py:f'}]", "x.yml:2:16: steps[0].task: '../t.py'"),
    ("[{task: 't.py:1f'}]", "steps[0].task: '1f' is not a Python function name"),
    ("[{task: 't.py:class'}]", "'class' is not a Python function name"),
    ("[{task: 't.txt:f'}]", "steps[0].task: 't.txt:f' is not a task (FILE.py:FUNCTION"),
    ("[usrs]", "x.yml:2:9: steps[0]: unknown step 'usrs'; did you mean 'users'?"),
    ("[[users]]", "x.yml:2:9: steps[0]: must be a step name, or a mapping with run: or task:"),
])
def test_bad_custom_steps(steps: str, message: str) -> None:
    with pytest.raises(PlaybookError) as e:
        parse(f"hosts: all\nsteps: {steps}\n", "x.yml")
    assert message in str(e.value)


def _tree(tmp_path: Path, steps: str) -> Path:
    """An inventory's directory: inventory, playbook, tasks/gpu.py."""
    d = tmp_path / "inv"
    (d / "tasks").mkdir(parents=True)
    (d / "inventory.yml").write_text(INVENTORY)
    (d / "tasks" / "gpu.py").write_text(TASKS)
    (d / "pb.yml").write_text(f"hosts: all\nsteps:\n{steps}")
    return d


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _refused(r: Result, *needles: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output and not _RAW.search(r.output), r.output
    for n in needles:
        assert n in r.output, r.output


def test_check_and_render_never_import_task_code(tmp_path: Path) -> None:
    d = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    for args in (["check", "--no-local-files"], ["render", "--out", str(tmp_path / "out")]):
        r = _cli(*args, "-i", str(d / "inventory.yml"))
        assert r.exit_code in (0, 1), r.output  # findings may say exit 1; never a crash
        assert not (d / "tasks" / "IMPORTED").exists(), args
    # the control: plan does import it (and lists it), then cannot reach the host
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"), "--json")
    assert (d / "tasks" / "IMPORTED").exists(), r.output
    data = json.loads(r.output)
    assert [i["path"] for i in data["tasks_imported"]] == [str((d / "tasks" / "gpu.py").resolve())]
    assert data["hosts"][0]["status"] == "unreachable" and r.exit_code == 1


def test_plan_says_which_task_files_it_imported(tmp_path: Path) -> None:
    import hashlib

    d = _tree(tmp_path, "  - tasks/gpu.py:install\n  - tasks/gpu.py:install_other\n")
    (d / "pb.yml").rename(tmp_path / "pb.yml")  # a directory inventory reads every .yml in it
    r = _cli("plan", "-i", str(d), "--playbook", str(tmp_path / "pb.yml"))
    digest = hashlib.sha256((d / "tasks" / "gpu.py").read_bytes()).hexdigest()[:16]
    line = f"imported task code: {(d / 'tasks' / 'gpu.py').resolve()} (sha256 {digest})"
    assert r.output.count(line) == 1, r.output  # two steps, one file, imported once
    assert not list((d / "tasks").glob("__pycache__")), "no bytecode written into the tree"


def _outside(tmp_path: Path) -> Path:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "gpu.py").write_text(TASKS)
    return other / "gpu.py"


def test_a_task_outside_the_tree_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    d = _tree(tmp_path, f"  - {outside}:install\n")
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"))
    _refused(r, f"{d / 'pb.yml'}:3:5: task: {outside} is outside the inventory's directory",
             "--tasks PATH")
    assert not (outside.parent / "IMPORTED").exists()
    # named on the command line (the file, or its directory), it is allowed
    for allowed in (outside, outside.parent):
        r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"),
                 "--tasks", str(allowed), "--json")
        assert r.exit_code == 1 and (outside.parent / "IMPORTED").exists(), r.output
        (outside.parent / "IMPORTED").unlink()


def test_a_symlink_escaping_the_tree_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    d = _tree(tmp_path, "  - tasks/link.py:install\n")
    (d / "tasks" / "link.py").symlink_to(outside)
    r = _cli("apply", "--yes", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"))
    _refused(r, f"{d / 'pb.yml'}:3:5: task: tasks/link.py is outside the inventory's directory",
             f"(through a symbolic link, to {outside})")
    assert not (outside.parent / "IMPORTED").exists()
    (d / "tasks" / "dirlink").symlink_to(outside.parent)
    (d / "pb.yml").write_text("hosts: all\nsteps:\n  - tasks/dirlink/gpu.py:install\n")
    _refused(_cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml")),
             "is outside the inventory's directory")


def test_a_symlinked_inventory_file_trusts_its_targets_tree_not_the_links(
        tmp_path: Path) -> None:
    """The trusted tree comes from the inventory's real path: `-i link.yml` (pointing into
    another tree) imports task code from the target's directory, never from the link's
    (issue 34, class 7). Before, the link's directory was trusted."""
    real = _tree(tmp_path, "  - tasks/gpu.py:install\n")        # the target's tree
    link_dir = tmp_path / "linkdir"
    (link_dir / "tasks").mkdir(parents=True)
    (link_dir / "tasks" / "gpu.py").write_text(TASKS)           # the link's tree
    (link_dir / "inventory.yml").symlink_to(real / "inventory.yml")
    r = _cli("plan", "-i", str(link_dir / "inventory.yml"), "--playbook", str(real / "pb.yml"),
             "--json")
    assert r.exit_code == 1, r.output  # imported, then the host is unreachable
    assert [i["path"] for i in json.loads(r.output)["tasks_imported"]] == [
        str((real / "tasks" / "gpu.py").resolve())]
    assert (real / "tasks" / "IMPORTED").exists()
    assert not (link_dir / "tasks" / "IMPORTED").exists()
    # a task file only in the link's directory is outside the (real) tree
    (real / "tasks" / "gpu.py").unlink()
    (real / "tasks" / "IMPORTED").unlink()
    (link_dir / "pb.yml").write_text(f"hosts: all\nsteps:\n  - {link_dir}/tasks/gpu.py:install\n")
    _refused(_cli("plan", "-i", str(link_dir / "inventory.yml"), "--playbook",
                  str(link_dir / "pb.yml")),
             f"task: {link_dir}/tasks/gpu.py is outside the inventory's directory "
             f"{real.resolve()}")
    assert not (link_dir / "tasks" / "IMPORTED").exists()


def test_an_inventory_in_a_symlinked_directory_trusts_the_real_directory(tmp_path: Path) -> None:
    """The reverse: `-i LINK` where LINK is a symbolic link to the inventory's directory, or
    `-i LINK/inventory.yml`: the tree is the real directory, and task files are found and
    listed under their real path."""
    real = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    (real / "pb.yml").rename(tmp_path / "pb.yml")  # a directory inventory reads every .yml
    link = tmp_path / "link"
    link.symlink_to(real)
    for given in (link, link / "inventory.yml"):
        r = _cli("plan", "-i", str(given), "--playbook", str(tmp_path / "pb.yml"), "--json")
        assert r.exit_code == 1, r.output
        assert [i["path"] for i in json.loads(r.output)["tasks_imported"]] == [
            str((real / "tasks" / "gpu.py").resolve())]
        (real / "tasks" / "IMPORTED").unlink()


@pytest.mark.parametrize(("steps", "task_file", "needles"), [
    ("  - tasks/gpu.py:instal\n", TASKS,
     (":3:5: task: tasks/gpu.py has no function 'instal'; did you mean 'install'?",
      "(functions: done, install, install_other)")),
    ("  - tasks/nope.py:f\n", TASKS, (":3:5: task: cannot read tasks/nope.py: No such file",)),
    ("  - {task: 'tasks/gpu.py:f', name: x}\n", "def f(c, host):\n    return (\n",
     ("gpu.py:2:", "not valid Python", "named by ", "pb.yml:3:12")),
    ("  - tasks/gpu.py:f\n", "raise RuntimeError('no cuda here')\n",
     (":3:5: task: importing tasks/gpu.py raised RuntimeError: no cuda here", "gpu.py:1)")),
    ("  - tasks/gpu.py:f\n", "import sys\nsys.exit(0)\n", ("raised SystemExit",)),
    ("  - tasks/gpu.py:f\n", "f = 3\n", ("tasks/gpu.py:f is not a function",)),
    ("  - tasks/gpu.py:f\n", "def f(c, h): pass\nf.check = 'yes'\n",
     ("tasks/gpu.py:f.check is not a function",)),
])
def test_bad_task_code_is_a_usage_error_before_any_host(
        tmp_path: Path, steps: str, task_file: str, needles: tuple[str, ...]) -> None:
    d = _tree(tmp_path, steps)
    (d / "tasks" / "gpu.py").write_text(task_file)
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"))
    _refused(r, *needles)
    assert "unreachable" not in r.output


def test_tasks_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    d = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    _refused(_cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"),
                  "--tasks", str(tmp_path / "missing")), "--tasks ", "no such file or directory")


def test_a_playbook_without_tasks_imports_nothing_and_lists_nothing(tmp_path: Path) -> None:
    d = _tree(tmp_path, "  - {run: 'true'}\n")
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"), "--json")
    assert json.loads(r.output)["tasks_imported"] == []
    assert not (d / "tasks" / "IMPORTED").exists()


# --- calling a task and its check (the connection is not used by these functions) --------

def _loaded(fn: object, check: object = None) -> object:
    from provision.steps.python_task import Loaded

    return Loaded(fn, check, "/inv/tasks/t.py")


def test_a_check_must_answer_a_bool() -> None:
    from provision.pytasks import load as pytasks

    host = object()
    got = pytasks.check(_loaded(None, lambda c, h: None), None, host, "t.py:f")
    assert got.error == "check of t.py:f returned NoneType None, not True (done) or False"
    got = pytasks.check(_loaded(None, lambda c, h: 1 / 0), None, host, "t.py:f")
    assert got.error.startswith("check of t.py:f: ZeroDivisionError: division by zero")
    assert pytasks.check(_loaded(None, lambda c, h: False), None, host, "t.py:f").value is False


def test_a_failing_command_in_a_task_is_reported_with_its_last_lines() -> None:
    from invoke.exceptions import UnexpectedExit
    from invoke.runners import Result

    from provision.pytasks import load as pytasks
    from provision.steps.python_task import RunTask

    def fails(c: object, host: object) -> None:
        raise UnexpectedExit(Result(stdout="", stderr="one\ntwo\nthree\nfour\n", exited=3,
                                    command="make install"))

    task = RunTask("t", "t.py:fails", _loaded(fails), "no check")
    assert pytasks.run(task, None, object()) == (
        "task t.py:fails: 'make install' exited 3: two / three / four")


def test_a_task_whose_check_still_says_not_done_fails() -> None:
    from provision.pytasks import load as pytasks
    from provision.steps.python_task import RunTask

    ran: list[int] = []
    task = RunTask("t", "t.py:f", _loaded(lambda c, h: ran.append(1), lambda c, h: False),
                   "its check says not done", True)
    assert pytasks.run(task, None, object()) == (
        "task t.py:f ran, but its check still says not done: the next apply would run it again")
    assert ran == [1]
    done = RunTask("t", "t.py:f", _loaded(lambda c, h: None, lambda c, h: True), "x", True)
    assert pytasks.run(done, None, object()) == ""


def test_sys_exit_in_a_task_fails_its_host_not_the_run() -> None:
    import sys

    from provision.pytasks import load as pytasks
    from provision.steps.python_task import RunTask

    task = RunTask("t", "t.py:f", _loaded(lambda c, h: sys.exit(3)), "no check")
    assert pytasks.run(task, None, object()).startswith("task t.py:f: SystemExit: 3 (")


def test_a_task_file_swapped_for_a_symlink_after_its_check_is_not_read(tmp_path: Path) -> None:
    """The path checked is the file read: a component turned into a symbolic link between
    `resolve` and the open (TOCTOU) is refused, not followed out of the tree."""
    from provision.pytasks import load as pytasks

    outside = _outside(tmp_path)
    d = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    spec = TaskSpec(label="t", path="tasks/gpu.py", function="install", where="pb.yml:3:5")
    real = pytasks.resolve(spec, pytasks.root_of(d / "inventory.yml"), ())
    assert pytasks._read(real, spec) == (d / "tasks" / "gpu.py").read_bytes()
    real.unlink()
    real.symlink_to(outside)  # the swap, after the check
    with pytest.raises(pytasks.TaskError, match="changed while it was being read"):
        pytasks._read(real, spec)


@pytest.mark.parametrize(("target", "mode", "words"), [
    ("tasks/gpu.py", 0o666, "is writable by its group or by others; a task file may be changed"),
    ("tasks", 0o777, "the directory {d}/tasks (above tasks/gpu.py) is writable by its group"),
    (".", 0o775, "the directory {d} (above tasks/gpu.py) is writable by its group"),
])
def test_task_code_someone_else_could_change_is_not_imported(
        tmp_path: Path, target: str, mode: int, words: str) -> None:
    """An inventory in a shared directory (/tmp, a group-writable tree): another local user
    could plant or swap the task file, so it is refused before it is imported."""
    d = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    (d / target).chmod(mode)
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"))
    _refused(r, words.format(d=d))
    assert not (d / "tasks" / "IMPORTED").exists()
    (d / target).chmod(0o1777 if target != "tasks/gpu.py" else 0o644)  # sticky, like /tmp
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"), "--json")
    assert "writable" not in r.output, r.output


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_task_code_owned_by_another_user_is_refused_unless_they_ran_sudo(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _tree(tmp_path, "  - tasks/gpu.py:install\n")
    os.chown(d / "tasks" / "gpu.py", 54321, -1)
    monkeypatch.delenv("SUDO_UID", raising=False)
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"))
    _refused(r, "gpu.py is owned by uid 54321, not by you or root")
    monkeypatch.setenv("SUDO_UID", "54321")  # `sudo provision plan` by that user: their tree
    r = _cli("plan", "-i", str(d / "inventory.yml"), "--playbook", str(d / "pb.yml"), "--json")
    assert "owned by uid" not in r.output and (d / "tasks" / "IMPORTED").exists(), r.output
