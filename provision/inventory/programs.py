"""What a service command runs, decided from its words (pure).

Jupyter and TensorBoard execute code for whoever reaches them, so `check` and `audit`
treat them specially, render Jupyter's config and fetch its token: all of that follows
what the command starts, never the service's name.
"""

from __future__ import annotations

import re
from typing import Literal

Program = Literal["jupyter", "tensorboard"]

_JUPYTER_SUBCOMMANDS = {"server", "lab", "notebook"}
_JUPYTER_BINARIES = {"jupyter-server", "jupyter-lab", "jupyter-notebook"}
_JUPYTER_MODULES = {"jupyter_server", "jupyterlab", "notebook", "jupyter"}
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


def _base(word: str) -> str:
    return _PLACEHOLDER.sub("", word).rsplit("/", 1)[-1]


def program(command: str | None) -> Program | None:
    """The code-executing program `command` starts, if any.

    jupyter server|lab|notebook, jupyter-server/-lab/-notebook, python -m jupyterlab ...;
    tensorboard, python -m tensorboard(.main). Paths and {venv} prefixes are ignored.
    """
    words = [_base(w) for w in (command or "").split()]
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in _JUPYTER_BINARIES or (w == "jupyter" and nxt in _JUPYTER_SUBCOMMANDS):
            return "jupyter"
        if w == "tensorboard":
            return "tensorboard"
        if w == "-m" and nxt:
            module = nxt.split(".", 1)[0]
            if module in _JUPYTER_MODULES:
                return "jupyter"
            if module == "tensorboard":
                return "tensorboard"
    return None
