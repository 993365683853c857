"""The one Jinja environment: every rendered file and remote script comes through here.

Pure: templates are read from `provision._templates` (the top-level `templates/` folder,
shipped in the wheel) through importlib.resources, so a non-editable install renders the
same as a checkout. StrictUndefined: a missing value is an error, never an empty string.
Filters: `q` quotes for POSIX sh, `py` writes a Python literal.
"""

from __future__ import annotations

import functools
import importlib.resources
import shlex
from typing import Any

import jinja2

from provision.errors import RenderError


def _load_template(name: str) -> str:
    return importlib.resources.files("provision._templates").joinpath(name).read_text("utf-8")


def _py_literal(value: Any) -> str:
    if not isinstance(value, str | int | bool):
        raise RenderError(f"cannot write {type(value).__name__} as a Python literal")
    return repr(value)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters["py"] = _py_literal
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


def render(template: str, **data: Any) -> str:
    """Render one template of `templates/` with `data`."""
    return environment().get_template(template).render(**data)
