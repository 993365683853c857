"""Where a DNS provider's secret may come from, and whom it may reach (issue 34, class 3).

An inventory is reviewed like code, but it is also read by whoever runs a read-only
command on a branch nobody has reviewed yet (`dns plan` on a pull request). So the
inventory must not pick which of the operator's local secrets becomes a credential, nor
where it goes:

* a key file an inventory names must lie, by its real path (every symlink resolved), in
  the inventory's own tree or in the operator's provision config directory
  (`$XDG_CONFIG_HOME/provision`, else `~/.config/provision`): never `~/.aws/credentials`,
  an SSH key, a token in another tool's directory;
* a key sent to a server the inventory names (PowerDNS's `api_url`) is bound to that
  server: its file is named for it (`server_key_name`), and its environment variable is
  used only beside a second one naming the same server (`origin`). Changing the server
  in the inventory alone then finds no key.

`placement_problem` and `read_bound` do the file-system reads (a real path, one open);
the rest is pure.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from provision.localfile import read_regular
from provision.text import printable


def config_dir() -> Path:
    """The operator's provision config directory: `$XDG_CONFIG_HOME/provision` (an
    absolute XDG_CONFIG_HOME, as the spec requires), else `~/.config/provision`."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~/.config"))
    return base / "provision"


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def roots(tree: str) -> tuple[str, ...]:
    """The real directories a secret file may lie in: the inventory's tree (unless it is
    your home directory or above it: then it would hold every file of yours) and the
    config directory."""
    out = []
    if tree:
        real = os.path.realpath(tree)
        home = os.path.realpath(os.path.expanduser("~"))
        if not _inside(home, real):
            out.append(real)
    out.append(os.path.realpath(config_dir()))
    return tuple(out)


def places(tree: str) -> str:
    """Where a key file may be, in words, for messages."""
    real = os.path.realpath(tree) if tree else ""
    config = f"your provision config directory {config_dir()}"
    if real and real in roots(tree):
        return f"the inventory's directory {real} or {config}"
    if real:
        return (f"{config} (the inventory's directory {real} is your home directory or "
                "above it, which would hold every file of yours)")
    return config


def placement_problem(path: str, tree: str) -> str | None:
    """Why the file at `path` (absolute, as the inventory resolved it) may not be a
    secret of this inventory, or None. Reads the file system (the real path)."""
    real = os.path.realpath(path)
    if any(_inside(real, top) for top in roots(tree)):
        return None
    via = f" (through a symbolic link, to {real})" if real != os.path.abspath(path) else ""
    return (f"{printable(path)}{printable(via)} is outside {places(tree)}: a key file the "
            "inventory names must be there, so that an inventory cannot make a command use "
            "another file of yours (~/.aws/credentials, an SSH key) as a credential")


def origin(url: str) -> str:
    """`scheme://host:port` of `url` (lower-case host, the default port written out): what
    a key is bound to."""
    u = urlsplit(url)
    host = (u.hostname or "").lower()
    port = u.port or (443 if u.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    return f"{u.scheme.lower()}://{shown}:{port}"


def server_key_name(host: str, port: int) -> str:
    """The name of the key file for a server: `HOST_PORT.key` (HOST lower-case, an IPv6
    address without brackets), e.g. `pdns.example.net_8081.key`."""
    return f"{host.strip('[]').lower()}_{port}.key"


def url_key_name(url: str) -> str:
    """`server_key_name` of the server `url` names."""
    u = urlsplit(url)
    return server_key_name(u.hostname or "", u.port or (443 if u.scheme == "https" else 80))


def read_bound(path: str, limit: int, what: str, tree: str, name: str | None = None) -> bytes:
    """The bytes of the secret file `path`, checked again where it is read: the file
    opened must lie in `roots(tree)` (its real path, from the open descriptor: a symlink
    swapped in since the inventory was loaded is seen), and be named `name` when the
    secret is bound to a server. OSError (a message in words) otherwise."""

    def check(real: str) -> str | None:
        if not any(_inside(real, top) for top in roots(tree)):
            return f"its real path {real} is outside {places(tree)}"
        if name is not None and os.path.basename(real) != name:
            return (f"its real path {real} is not named {name}, the key file name of the "
                    "server it would be sent to")
        return None

    return read_regular(Path(path), limit, what, follow=True, real_check=check)
