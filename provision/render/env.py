"""The one Jinja environment: every rendered file and remote script comes through here.

Pure apart from reading templates from `provision._templates` (the top-level `templates/`
folder, shipped in the wheel) through importlib.resources, so a non-editable install
renders the same as a checkout, and keeping their compiled code beside the package's
bytecode (`template_cache`). StrictUndefined: a missing value is an error, never an empty string.
Filters: `q` quotes for POSIX sh, `py` writes a Python literal; `comment`, `ssh`, `ipt`,
`ipt_comment`, `unit`, `unit_text` check a value against the rules of the file it lands in (`sinks`).
"""

from __future__ import annotations

import functools
import importlib.resources
import shlex
import threading
from pathlib import Path
from typing import Any

import jinja2

from provision.errors import RenderError

from . import sinks, template_cache


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
    env.filters["comment"] = sinks.comment
    env.filters["ssh"] = sinks.ssh_token
    env.filters["ipt"] = sinks.ipt_source
    env.filters["ipt_comment"] = sinks.ipt_comment
    env.filters["unit"] = sinks.unit_value
    env.filters["unit_text"] = sinks.unit_text
    env.filters["deb822"] = sinks.deb822_word
    env.filters["apt_version"] = sinks.apt_version
    template_cache.attach(env, Path(str(importlib.resources.files("provision._templates"))) / "__pycache__")
    return env


_compile_lock = threading.Lock()


def render(template: str, **data: Any) -> str:
    """Render one template of `templates/` with `data`."""
    # Jinja caches compiled templates but does not lock: 32 host threads asking for one
    # template at once compiled it 32 times. Once cached, the lookup under the lock is a
    # dict hit.
    with _compile_lock:
        compiled = environment().get_template(template)
    return compiled.render(**data)
