"""`python_envs` in the inventory: Python virtual environments as data (pure).

An environment is a name, a set of requirements (`jupyterlab>=4.2`, `tensorboard`), the
Python that creates it and the index its packages come from. It lives on the host in
`/opt/provision/envs/NAME-DIGEST`, a directory named by the digest of everything that
decides its content (so a changed requirement is a new directory, built beside the old
one), and `/opt/provision/envs/NAME` is a symlink to the current one. A service that names
the environment runs from the digest's directory: its unit changes with the requirements,
which is what restarts it, and only it (`provision.steps.python_envs`).

Every field ends up in a requirements file, a command line or a record read back from the
host, so each is checked as strictly as a name or a path.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

from provision.dnsdata.endpoint import is_loopback
from provision.frozen import frozen
from provision.text import printable, unsafe

from .fields import check_abs_path, check_name, check_url

ENVS_ROOT = "/opt/provision/envs"
DEFAULT_PYTHON = "python3"
DEFAULT_INDEX = "https://pypi.org/simple"
RECORD = ".provision-env.json"  # inside each environment's directory, written last
REQUIREMENTS = "provision-requirements.txt"
PREVIOUS = ".previous-"  # ENVS_ROOT/.previous-NAME: the environment before the last switch
DIGEST_CHARS = 16
_DIGEST_SUFFIX = re.compile(rf"-[0-9a-f]{{{DIGEST_CHARS}}}$")
_PYTHON = re.compile(r"^python3(\.[0-9]{1,2})?$")
# Plain http is refused but to these: see `index_problem`.
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in
                         ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))


def check_env_name(value: str) -> str:
    """An environment's name: a name (it becomes a directory), never one that reads as
    another environment's content-addressed directory (`NAME-<16 hex digits>`)."""
    check_name(value)
    if _DIGEST_SUFFIX.search(value):
        raise ValueError(f"invalid environment name {value!r}: a name ending in '-' and "
                         f"{DIGEST_CHARS} hex digits is how provision names an environment's "
                         "directories; pick another")
    return value


def check_requirement(value: str) -> str:
    """A PEP 508 requirement from an index: a name, extras, a version range, markers.
    Returned in packaging's normal spelling (`jupyterlab >= 4.2` is `jupyterlab>=4.2`)."""
    bad = unsafe(value)
    if bad:
        raise ValueError(f"a requirement must be printable text on one line (found {printable(bad)!r})")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(value)
    except InvalidRequirement as e:
        raise ValueError(f"invalid requirement {value!r} ({printable(str(e).splitlines()[0])}); "
                         "write a package name with an optional version range, e.g. "
                         "jupyterlab>=4.2 or tensorboard==2.17.*") from None
    if req.url:
        raise ValueError(f"requirement {value!r} names a URL: packages come from the "
                         "environment's index_url (a direct URL would bypass it)")
    return str(req)


def check_python(value: str) -> str:
    if _PYTHON.match(value):
        return value
    if value.startswith("/"):
        return check_abs_path(value)
    raise ValueError(f"invalid python {value!r} (python3, python3.N, or the absolute path "
                     "of an interpreter on the host)")


def index_problem(url: str) -> str:
    """Why packages must not be fetched from `url`, or "".

    A package is code that runs on the host as its service's user (and `setup.py` as root),
    and pip checks no signature: the transport is the only integrity there is. So an index
    is https://, or plain http:// only to a loopback address or to a private address written
    as an IP (10/8, 172.16/12, 192.168/16, fc00::/7): a mirror on the hosts' own segment (a
    devpi in the VPC, the lab's mirror), reached without a resolver that could point the
    name anywhere. Credentials never belong in the URL (`check_url` refuses a user@).
    """
    u = urlsplit(url)
    host = (u.hostname or "").strip("[]")
    if u.scheme == "https":
        return ""
    if is_loopback(host):
        return ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and any(ip in n for n in PRIVATE_NETWORKS):
        return ""
    return (f"{url} is plain http:// to {host}: packages are code that runs on the host and "
            "pip checks no signature, so plain http is allowed only to a loopback address or "
            "a private IP address (10/8, 172.16/12, 192.168/16, fc00::/7: a mirror on the "
            "hosts' own segment); use https:// otherwise")


def check_index_url(value: str) -> str:
    check_url(value)
    why = index_problem(value)
    if why:
        raise ValueError(why)
    return value.rstrip("/")


def check_venv(value: str) -> str:
    """A service's `venv`: an absolute path (a virtualenv made elsewhere) or the name of a
    python env."""
    if value.startswith("/"):
        return check_abs_path(value)
    try:
        return check_env_name(value)
    except ValueError:
        raise ValueError(f"invalid venv {value!r}: the name of a python env (letters, digits, "
                         "'.', '_', '-') or the absolute path of a virtualenv") from None


EnvName = Annotated[str, AfterValidator(check_env_name)]
PipRequirement = Annotated[str, AfterValidator(check_requirement)]
PythonCommand = Annotated[str, AfterValidator(check_python)]
IndexUrl = Annotated[str, AfterValidator(check_index_url)]
Venv = Annotated[str, AfterValidator(check_venv)]


def package_key(requirement: str) -> str:
    """The package a requirement is about, normalised (`Jupyter_Lab[x]>=1` -> jupyter-lab)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(Requirement(requirement).name))


@frozen
class PythonEnv:
    """One environment as the host gets it. `packages` are normalised and sorted by
    package, so the same set written in another order is the same environment."""

    name: str
    packages: tuple[str, ...]
    python: str = DEFAULT_PYTHON
    index_url: str = DEFAULT_INDEX
    extra_index_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, packages: list[str] | tuple[str, ...], python: str | None = None,
           index_url: str | None = None, extra_index_urls: list[str] | tuple[str, ...] = ()) -> PythonEnv:
        return cls(name, tuple(sorted(packages, key=lambda p: (package_key(p), p))),
                   python or DEFAULT_PYTHON, index_url or DEFAULT_INDEX,
                   tuple(dict.fromkeys(extra_index_urls)))

    def identity(self) -> dict[str, object]:
        """Everything that decides what gets installed (not the installer: a host that gains
        uv keeps its environments)."""
        return {"python": self.python, "index_url": self.index_url,
                "extra_index_urls": list(self.extra_index_urls), "packages": list(self.packages)}

    @property
    def digest(self) -> str:
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]

    @property
    def dirname(self) -> str:
        return f"{self.name}-{self.digest}"

    @property
    def path(self) -> str:
        """The directory services run from (content-addressed)."""
        return f"{ENVS_ROOT}/{self.dirname}"

    @property
    def link(self) -> str:
        return f"{ENVS_ROOT}/{self.name}"

    @property
    def previous_link(self) -> str:
        return f"{ENVS_ROOT}/{PREVIOUS}{self.name}"

    @property
    def venv_package(self) -> str | None:
        """The Debian package that brings `-m venv` its ensurepip for this Python (None: an
        interpreter named by path, whose packaging is the user's)."""
        return f"{self.python}-venv" if _PYTHON.match(self.python) else None

    def requirements_txt(self) -> str:
        return "".join(f"{p}\n" for p in self.packages)


def duplicate_package(packages: list[str]) -> tuple[int, int] | None:
    """Indexes (first, second) of two requirements on the same package, or None."""
    seen: dict[str, int] = {}
    for i, p in enumerate(packages):
        key = package_key(p)
        if key in seen:
            return seen[key], i
        seen[key] = i
    return None


def summary(env: PythonEnv) -> str:
    """The requirement set in words, for messages."""
    extra = f" (+ {', '.join(env.extra_index_urls)})" if env.extra_index_urls else ""
    return f"{', '.join(env.packages)} from {env.index_url}{extra} with {env.python}"
