"""Your own Python tasks in a playbook (public API; docs/playbook-steps.md).

A task is a function of the host's `fabric.Connection` and the host's model::

    from provision.task import HostModel, task

    def cuda_installed(c, host: HostModel) -> bool:
        return c.run("test -x /usr/local/cuda/bin/nvcc", warn=True).ok

    @task(check=cuda_installed)
    def install_cuda(c, host: HostModel) -> None:
        c.sudo("apt-get install -y cuda-toolkit-12-4")

named in a playbook as `- task: tasks/cuda.py:install_cuda` (the path relative to the
inventory's directory). `check` says whether the task is done: `plan` calls it (never the
task), and `apply` runs the task only when it returns False, then calls it again and
fails the host unless it now returns True. A task without a check runs on every apply.
A task fails by raising; every `c.run`/`c.sudo` that exits non-zero raises (the
connection is given with `warn` off), so a failing command fails the task.

The decorator only sets the function's `check` attribute: `install_cuda.check =
cuda_installed` is the same. This module imports nothing heavy (no fabric).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from provision.inventory.model import Host as HostModel

__all__ = ["CHECK", "HostModel", "task"]

CHECK = "check"  # the attribute of a task function that holds its check

F = TypeVar("F", bound=Callable[..., Any])


def task(fn: F | None = None, *, check: Callable[[Any, HostModel], bool] | None = None) -> Any:
    """Mark `fn` as a provision task, with `check(c, host) -> bool` (done?) when given.
    Use as `@task` or `@task(check=...)`."""
    def mark(f: F) -> F:
        if check is not None:
            if not callable(check):
                raise TypeError("task(check=...) must be a function (c, host) -> bool")
            setattr(f, CHECK, check)
        return f

    return mark(fn) if fn is not None else mark
