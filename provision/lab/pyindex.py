"""The lab's Python package index, as data (pure): which of the operator's venv's
distributions an inventory's `python_envs` need, how an installed distribution is laid
out again as a wheel, and the PEP 503 pages that list the wheels.

The lab has no Internet, and the venv that ran `lab up` (`pip install 'provision[lab]'`)
already holds Jupyter's and TensorBoard's distributions, built for the Python the lab
hosts run (they boot over this machine's `/`). `lab adopt` repacks the ones an env needs
into wheels (`provision/lab/pyindex_shell.py`) and serves them on the lab's private
segment, so a declared env installs in the lab as it would from PyPI, without a network.
A requirement the venv cannot satisfy is reported by name: pip would fail for it.

When the venv's Python is not the hosts' (a pyenv 3.11.7 against Debian's 3.11.2), some
of its distributions do not fit them: `lab adopt --wheels DIR` takes wheels the operator
downloaded with the hosts' Python instead, read from their own METADATA (`wheel_dist`),
preferred over the venv's in `closure` and served as they are.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from provision.frozen import frozen
from provision.text import printable

PORT = 8080                     # on the resolver's private address (it runs no inventory)
ROOT = "/srv/provision-lab-index"  # inside the resolver container, root's
UNIT = "provision-lab-index"    # the transient unit that serves it
# dist-info files an installer writes (not the wheel's), and RECORD, made again
INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "RECORD", "direct_url.json",
                             "uv_cache.json"})


@frozen
class Dist:
    """An installed distribution, as the index needs it."""

    name: str                   # canonical (PEP 503)
    version: str
    requires: tuple[str, ...]   # Requires-Dist, as written
    dist_info: str              # its directory's name, NAME-VERSION.dist-info
    editable: bool = False      # an editable install has no files to repack
    requires_python: str = ""   # Requires-Python, as written
    wheel: str = ""             # a wheel of --wheels DIR (its path), served as it is; "": the venv's
    tags: tuple[str, ...] = ()  # that wheel's tags (PEP 425), from its file name


class WheelError(ValueError):
    """A file of --wheels DIR that is not a wheel the index can serve (exit 2)."""


METADATA_MAX = 1 << 20  # a METADATA file is a few KiB; more is not a wheel's


def wheel_dist(path: str, metadata: bytes) -> Dist:
    """The Dist of the wheel at `path` (its file name already checked by `wheel_tags`),
    from its `*.dist-info/METADATA`: Name and Version must be the file name's."""
    from email.parser import BytesParser
    from email.policy import compat32

    from packaging.version import InvalidVersion, Version

    file = PurePosixPath(path).name
    name, version, tags = wheel_tags(file)
    msg = BytesParser(policy=compat32).parsebytes(metadata)
    got_name, got_version = msg.get("Name"), msg.get("Version")
    if not isinstance(got_name, str) or not isinstance(got_version, str):
        raise WheelError(f"{path}: its METADATA has no Name or no Version: not a wheel")
    try:
        same = canonical(got_name) == name and Version(got_version) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        raise WheelError(f"{path}: its METADATA is {got_name} {got_version}, its file name "
                         f"{name} {version}: not a wheel of what it is named")
    requires = tuple(str(r) for r in msg.get_all("Requires-Dist") or ())
    stem = file.split("-", 2)
    return Dist(name, got_version.strip(), requires, f"{stem[0]}-{stem[1]}.dist-info",
                requires_python=str(msg.get("Requires-Python") or "").strip(), wheel=path,
                tags=tags)


def wheel_tags(file: str) -> tuple[str, str, tuple[str, ...]]:
    """(canonical name, version, tags) of a wheel's file name; WheelError if it is not one."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        name, version, _, tags = parse_wheel_filename(file)
    except (InvalidWheelFilename, ValueError) as e:
        raise WheelError(f"{file}: not a wheel's file name (NAME-VERSION-PY-ABI-PLATFORM.whl): "
                         f"{e}") from None
    if "/" in file or file.startswith("."):
        raise WheelError(f"{file}: not a wheel's file name")
    return str(name), str(version), tuple(sorted(str(t) for t in tags))


def host_tags(python: str, platforms: Iterable[str]) -> frozenset[str]:
    """The tags a CPython `python` (3.11.2) on `platforms` installs, as pip computes them."""
    from packaging.tags import compatible_tags, cpython_tags

    v = tuple(int(x) for x in python.split(".")[:2])
    plats = list(platforms)
    return frozenset(str(t) for t in (*cpython_tags(v, platforms=plats),
                                      *compatible_tags(v, f"cp{v[0]}{v[1]}", plats)))


def canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def index_url(address: str, port: int = PORT) -> str:
    return f"http://{address}:{port}/simple"


def closure(requirements: Iterable[str], dists: Mapping[str, Dist], python: str,
            wheels: Mapping[str, Dist] | None = None, tags: frozenset[str] = frozenset(),
            ) -> tuple[tuple[Dist, ...], tuple[str, ...]]:
    """(the distributions `requirements` need, transitively, in the order met; what
    neither `wheels` (--wheels DIR) nor the venv has, holds at a version the requirement
    excludes or for another Python, in words). `python` is the hosts' version (3.11.2):
    markers are evaluated for it, with each requirement's extras, and each distribution's
    Requires-Python must admit it (the venv's own Python may be newer); a wheel of DIR
    must also carry one of `tags`, the hosts'. A wheel of DIR is preferred to the venv's
    distribution of the same name; the venv's serves when the wheel does not fit."""
    from packaging.requirements import Requirement

    wheels = wheels or {}
    need: dict[tuple[str, str], Dist] = {}
    missing: dict[str, None] = {}
    todo: list[tuple[str, str]] = [(r, "") for r in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        text, extra = todo.pop(0)
        req = Requirement(text)
        env = {"extra": extra, "python_version": ".".join(python.split(".")[:2]),
               "python_full_version": python}
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonical(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        candidates = [d for d in (wheels.get(name), dists.get(name)) if d is not None]
        if not candidates:
            missing[f"{req} (not in the venv{' nor in --wheels' if wheels else ''})"] = None
            continue
        reasons = [_unfit(req, d, python, tags) for d in candidates]
        chosen = next((d for d, why in zip(candidates, reasons, strict=True) if why is None), None)
        if chosen is None:
            missing.update(dict.fromkeys(r for r in reasons if r))
            continue
        need.setdefault((chosen.name, chosen.wheel), chosen)
        todo += [(r, e) for r in chosen.requires for e in ("", *sorted(req.extras))]
    return tuple(need.values()), tuple(missing)


def _unfit(req: Any, d: Dist, python: str, tags: frozenset[str]) -> str | None:
    """Why `d` cannot serve `req` (a Requirement) on the hosts, or None."""
    from packaging.specifiers import SpecifierSet

    what = PurePosixPath(d.wheel).name if d.wheel else f"{d.name} {d.version}"
    if d.editable:
        return f"{req} (installed editable: no files to serve)"
    if req.specifier and not req.specifier.contains(d.version, prereleases=True):
        return f"{req} ({what} from --wheels)" if d.wheel else f"{req} (the venv has {d.version})"
    if d.requires_python and not SpecifierSet(d.requires_python).contains(python, prereleases=True):
        return f"{what} (it requires Python {d.requires_python}, the lab's hosts run {python})"
    if d.wheel and not set(d.tags) & tags:
        return f"{what} (its tags {', '.join(d.tags)} do not fit the lab's hosts' Python {python})"
    return None


_STEM = re.compile(r"[A-Za-z0-9_.+!]+-[A-Za-z0-9_.+!]+")
_TAG = re.compile(r"[A-Za-z0-9_.]+")


def wheel_filename(dist_info: str, tags: Iterable[str]) -> str:
    """NAME-VERSION-PY-ABI-PLATFORM.whl, its tags compressed (PEP 425) when they are a
    product (py2.py3-none-any), else the first: the WHEEL file inside keeps every tag."""
    stem = dist_info.removesuffix(".dist-info")
    if not _STEM.fullmatch(stem):
        raise ValueError(f"{printable(dist_info)}: not NAME-VERSION.dist-info")
    ts = [t.split("-") for t in dict.fromkeys(tags) if t.count("-") == 2]
    bad = [t for t in ts if not all(_TAG.fullmatch(x) for x in t)]
    if bad:  # they make the served file's name: a / or .. there would leave the directory
        raise ValueError(f"{printable(dist_info)}: WHEEL tag {printable('-'.join(bad[0]))} is "
                         "not letters, digits, _ and .")
    if not ts:
        raise ValueError(f"{dist_info}: WHEEL names no tag")
    parts = [list(dict.fromkeys(t[i] for t in ts)) for i in range(3)]
    if len(parts[0]) * len(parts[1]) * len(parts[2]) == len(ts):
        return f"{stem}-{'-'.join('.'.join(p) for p in parts)}.whl"
    return f"{stem}-{'-'.join(ts[0])}.whl"


def arcname(record_path: str, site: str, venv: str, data_dir: str,
            entry_scripts: frozenset[str]) -> str | None:
    """Where a file of RECORD (a path relative to site-packages) goes in the wheel, or
    None: bytecode, the installer's own files, a console script the installer makes again
    from entry_points.txt, or a file outside the venv."""
    p = PurePosixPath(record_path)
    if "__pycache__" in p.parts or p.suffix == ".pyc":
        return None
    if len(p.parts) == 2 and p.parts[0].endswith(".dist-info") and p.name in INSTALLER_FILES:
        return None
    full = _normal(PurePosixPath(site) / p)
    if full is None:
        return None
    site_p, venv_p = PurePosixPath(site), PurePosixPath(venv)
    if full.is_relative_to(site_p):
        return full.relative_to(site_p).as_posix()
    if not full.is_relative_to(venv_p):
        return None
    rel = full.relative_to(venv_p)
    if rel.parts[0] == "bin":
        if len(rel.parts) != 2 or rel.name in entry_scripts:
            return None
        return f"{data_dir}/scripts/{rel.name}"
    if rel.parts[:2] == ("include", "site") and len(rel.parts) > 4:
        return f"{data_dir}/headers/{PurePosixPath(*rel.parts[4:]).as_posix()}"
    return f"{data_dir}/data/{rel.as_posix()}"


def _normal(p: PurePosixPath) -> PurePosixPath | None:
    out: list[str] = []
    for part in p.parts:
        if part == "..":
            if len(out) <= 1:
                return None
            out.pop()
        elif part not in (".", ""):
            out.append(part)
    return PurePosixPath(*out)


def script_text(data: bytes) -> bytes:
    """A script's first line back to `#!python` (the installer writes the env's own), as a
    wheel carries it; a binary (uv, ruff) as it is."""
    if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
        rest = data.split(b"\n", 1)
        return b"#!python\n" + (rest[1] if len(rest) > 1 else b"")
    return data


def simple_pages(wheels: Mapping[str, str]) -> dict[str, str]:
    """The PEP 503 pages for `wheels` (file name -> sha256 hex), path -> text:
    simple/index.html and simple/PROJECT/index.html, links into files/."""
    projects: dict[str, list[str]] = {}
    for w in sorted(wheels):
        projects.setdefault(canonical(w.split("-", 1)[0]), []).append(w)
    pages = {}
    for name, ws in sorted(projects.items()):
        links = "".join(f'<a href="../../files/{html.escape(w)}#sha256={wheels[w]}">'
                        f"{html.escape(w)}</a>\n" for w in ws)
        pages[f"simple/{name}/index.html"] = f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"
    listing = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(projects))
    pages["simple/index.html"] = f"<!DOCTYPE html>\n<html><body>\n{listing}</body></html>\n"
    return pages
