"""The lab's Python package index, as data (pure): which of the operator's venv's
distributions an inventory's `python_envs` need, how an installed distribution is laid
out again as a wheel, and the PEP 503 pages that list the wheels.

The lab has no Internet, and the venv that ran `lab up` (`pip install 'provision[lab]'`)
already holds Jupyter's and TensorBoard's distributions, built for the Python the lab
hosts run (they boot over this machine's `/`). `lab adopt` repacks the ones an env needs
into wheels (`provision/lab/pyindex_shell.py`) and serves them on the lab's private
segment, so a declared env installs in the lab as it would from PyPI, without a network.
A requirement the venv cannot satisfy is reported by name: pip would fail for it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

from provision.frozen import frozen

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


def canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def index_url(address: str, port: int = PORT) -> str:
    return f"http://{address}:{port}/simple"


def closure(requirements: Iterable[str], dists: Mapping[str, Dist],
            python: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the distributions `requirements` need, transitively, in the order met; what the
    venv lacks, holds at a version the requirement excludes or for another Python, in
    words). `python` is the hosts' version (3.11.2): markers are evaluated for it, with
    each requirement's extras, and each distribution's Requires-Python must admit it (the
    venv's own Python may be newer)."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    need: dict[str, None] = {}
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
        d = dists.get(name)
        if d is None or d.editable:
            missing[f"{req} (not in the venv)" if d is None else
                    f"{req} (installed editable: no files to serve)"] = None
            continue
        if req.specifier and not req.specifier.contains(d.version, prereleases=True):
            missing[f"{req} (the venv has {d.version})"] = None
            continue
        if d.requires_python and not SpecifierSet(d.requires_python).contains(python, prereleases=True):
            missing[f"{d.name} {d.version} (it requires Python {d.requires_python}, the lab's "
                    f"hosts run {python})"] = None
            continue
        need[name] = None
        todo += [(r, e) for r in d.requires for e in ("", *sorted(req.extras))]
    return tuple(need), tuple(missing)


def wheel_filename(dist_info: str, tags: Iterable[str]) -> str:
    """NAME-VERSION-PY-ABI-PLATFORM.whl, its tags compressed (PEP 425) when they are a
    product (py2.py3-none-any), else the first: the WHEEL file inside keeps every tag."""
    stem = dist_info.removesuffix(".dist-info")
    ts = [t.split("-") for t in dict.fromkeys(tags) if t.count("-") == 2]
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
