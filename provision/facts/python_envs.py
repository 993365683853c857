"""Fact: the Python environments provision built under /opt/provision/envs, read from the
record each one holds (`.provision-env.json`, written after a successful install), and
whether uv is on the host. Pure parser.

Records: `pyenvtool uv PATH`; `pyenvlink NAME TARGET` (the current environment's link,
and `.previous-NAME`, the one before the last switch); `pyenvdir DIRNAME yes|no RECORD`
(whether `bin/python` is there; the record in base64, `-` when there is none).

The record is the host's word for what an environment holds, and it decides whether
anything is installed: it is parsed as strictly as the inventory (the same field checks),
and a record that does not describe its own directory (its digest) is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from provision.frozen import frozen
from provision.inventory.python_envs import (
    PREVIOUS,
    PythonEnv,
    check_env_name,
    check_index_url,
    check_python,
    check_requirement,
)
from provision.text import printable, unsafe

from .spec import FactsError, FactSpec, Rec

FORMAT = 1
KEYS = frozenset({"format", "name", "python", "index_url", "extra_index_urls", "packages",
                  "installer"})
INSTALLERS = frozenset({"pip", "uv"})


@frozen
class EnvRecord:
    """What an environment's directory says it holds."""

    env: PythonEnv
    installer: str


@frozen
class EnvDir:
    name: str  # NAME-DIGEST
    python: bool  # bin/python is there
    record: EnvRecord | None  # None: no record (an install that did not finish)

    @property
    def complete(self) -> bool:
        return self.python and self.record is not None


@frozen
class PythonEnvs:
    uv: str | None = None
    links: dict[str, str] = field(default_factory=dict)  # NAME -> target
    previous: dict[str, str] = field(default_factory=dict)  # NAME -> target before the last switch
    dirs: dict[str, EnvDir] = field(default_factory=dict)  # NAME-DIGEST -> what it holds


def record_text(env: PythonEnv, installer: str) -> str:
    """The record written into an environment's directory once its install succeeded."""
    doc = {"format": FORMAT, "name": env.name, "installer": installer, **env.identity()}
    return json.dumps(doc, sort_keys=True) + "\n"


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} is not a list of strings")
    return value


def parse_record(text: str, dirname: str) -> EnvRecord:
    """The record of directory `dirname`; ValueError saying why it is refused."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(doc, dict) or set(doc) != KEYS:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"expected the keys {', '.join(sorted(KEYS))} (got {got})")
    if doc["format"] != FORMAT:
        raise ValueError(f"unknown format {doc['format']!r}")
    scalars = {k: doc[k] for k in ("name", "python", "index_url", "installer")}
    for k, v in scalars.items():
        if not isinstance(v, str):
            raise ValueError(f"{k} is not a string")
    texts = [*scalars.values(), *_strings(doc["packages"], "packages"),
             *_strings(doc["extra_index_urls"], "extra_index_urls")]
    bad = next((c for t in texts if (c := unsafe(t))), None)
    if bad:  # json's \u escapes can carry what the probe's own check cannot see
        raise ValueError(f"holds the character {printable(bad)!r}")
    if doc["installer"] not in INSTALLERS:
        raise ValueError(f"unknown installer {doc['installer']!r}")
    packages = doc["packages"]
    if not packages or any(check_requirement(p) != p for p in packages):
        raise ValueError("packages are not requirements as provision writes them")
    env = PythonEnv.of(check_env_name(doc["name"]), packages, check_python(doc["python"]),
                       check_index_url(doc["index_url"]),
                       [check_index_url(u) for u in doc["extra_index_urls"]])
    if env.dirname != dirname:
        raise ValueError(f"it describes {env.dirname}, not its own directory {dirname}")
    return EnvRecord(env, doc["installer"])


def _record(rec: Rec) -> EnvRecord | None:
    dirname, b64 = rec.fields[0], rec.fields[2]
    if b64 == "-":
        return None
    try:
        text = "" if b64 == "." else base64.b64decode(b64, validate=True).decode("utf-8")
        return parse_record(text, dirname)
    except (binascii.Error, UnicodeDecodeError):
        why = "not base64 of UTF-8 text"
    except ValueError as e:
        why = str(e)
    raise FactsError(f"line {rec.line}: the record of python env {printable(dirname)} "
                     f"(/opt/provision/envs/{printable(dirname)}/.provision-env.json) is "
                     f"refused: {printable(why)}; remove that directory on the host to rebuild it")


def parse(records: Sequence[Rec]) -> PythonEnvs:
    uv: str | None = None
    links: dict[str, str] = {}
    previous: dict[str, str] = {}
    dirs: dict[str, EnvDir] = {}
    for r in records:
        f = r.fields
        if r.kind == "pyenvtool" and len(f) == 2 and f[0] == "uv" and f[1].startswith("/"):
            uv = f[1]
        elif r.kind == "pyenvlink" and len(f) == 2:
            if f[0].startswith(PREVIOUS):
                previous[f[0][len(PREVIOUS):]] = f[1]
            else:
                links[f[0]] = f[1]
        elif r.kind == "pyenvdir" and len(f) == 3 and f[1] in ("yes", "no"):
            dirs[f[0]] = EnvDir(f[0], f[1] == "yes", _record(r))
        else:
            raise FactsError(f"line {r.line}: malformed {printable(r.kind)} record")
    return PythonEnvs(uv, links, previous, dirs)


SPEC = FactSpec("python_envs", ("pyenvtool", "pyenvlink", "pyenvdir"), parse)
