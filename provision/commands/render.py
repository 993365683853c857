"""`provision render --out DIR` and `provision ssh-config [--write]`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from provision.commands.common import (
    echo,
    emit_json,
    inventory_option,
    json_option,
    load,
)
from provision.errors import UsageError
from provision.inventory.fields import check_path, check_user
from provision.localfile import read_regular
from provision.render import render_ssh_config, write_tree
from provision.state import atomic_write
from provision.text import printable, printable_lines

INCLUDE_LINE = "Include config.d/*.conf"
CONF_NAME = "provision.conf"
# An Include that already pulls in our file: `Include config.d/*.conf`, `~/.ssh/config.d/*`,
# `config.d/provision.conf`, ... (keyword case-insensitive, `=` allowed, several patterns).
_INCLUDE = re.compile(r"^\s*include(\s*=\s*|\s+)(?P<args>.+)$", re.IGNORECASE)
_COVERING = re.compile(r"""^["']?(~/\.ssh/|%d/\.ssh/)?config\.d/(\*|\*\.conf|provision\.conf)["']?$""")


@click.command("render")
@inventory_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="directory to write DIR/ssh_config and DIR/<host>/<remote path>")
@json_option
def render_cmd(inventory_path: str | None, out_dir: str, as_json: bool) -> None:
    """Write every artifact: the ssh_config and, per host, the files at their remote paths."""
    if not out_dir.strip():  # Path("") is the current directory: never by accident
        raise UsageError("--out needs a directory (it is empty)")
    inv = load(inventory_path)
    out = Path(out_dir).absolute()  # write_tree returns absolute paths
    written = write_tree(inv, out)  # a RenderError is a UsageError: exit 2, nothing written
    if as_json:
        emit_json({"out": str(out), "files": [str(p) for p in written]})
        return
    per_node: dict[str, int] = {}
    for p in written:
        rel = p.relative_to(out)
        if len(rel.parts) > 1:
            per_node[rel.parts[0]] = per_node.get(rel.parts[0], 0) + 1
    echo(f"wrote {len(written)} files to {out}/")
    echo(f"  ssh_config  {out / 'ssh_config'}")
    for node in (*inv.bastions, *inv.hosts):
        echo(f"  {node.name:<10}  {per_node.get(node.name, 0)} files under {out / node.name}/")


@click.command("ssh-config")
@inventory_option
@click.option("--write", is_flag=True,
              help=f"install as ~/.ssh/config.d/{CONF_NAME} and add '{INCLUDE_LINE}' "
                   "at the top of ~/.ssh/config when no such Include is there")
@click.option("--user", default=None, help="log in as this team member instead of the inventory user")
@click.option("--identity-file", default=None, metavar="PATH",
              help="private key to use (default: the team member's or the inventory's)")
@json_option
def ssh_config_cmd(inventory_path: str | None, write: bool, user: str | None,
                   identity_file: str | None, as_json: bool) -> None:
    """Print the ssh_config for the inventory, or install it with --write."""
    try:
        if user is not None:
            check_user(user)
        if identity_file is not None:
            check_path(identity_file)
    except ValueError as e:
        raise UsageError(str(e)) from None
    inv = load(inventory_path)
    text = render_ssh_config(inv, user=user, identity_file=identity_file)
    if not write:
        if as_json:
            emit_json({"ssh_config": text})
        else:
            click.echo(printable_lines(text), nl=False)
        return
    try:
        changes = install(text, Path.home() / ".ssh")
    except OSError as e:
        where = f"{printable(str(e.filename))}: " if e.filename else ""
        raise UsageError(f"cannot install the ssh_config: {where}{e.strerror or e}") from None
    if as_json:
        emit_json({"changed": changes, "path": str(Path.home() / ".ssh" / "config.d" / CONF_NAME)})
        return
    if not changes:
        echo("ssh config already up to date; nothing changed")
    for c in changes:
        click.echo(click.style("changed", fg="green") + " " + printable(c))


# --- pure decisions ------------------------------------------------------------------------

def has_include(config_text: str) -> bool:
    """Whether ~/.ssh/config already includes our file (any top-level Include covering it)."""
    for line in config_text.splitlines():
        m = _INCLUDE.match(line)
        if m and any(_COVERING.match(arg) for arg in m.group("args").split()):
            return True
    return False


def with_include(config_text: str) -> str:
    """`config_text` with our Include as its first line; nothing else changes."""
    return f"{INCLUDE_LINE}\n{config_text}"


# --- the shell: writes only what differs ------------------------------------------------------

def _write_atomic(path: Path, content: str, mode: int) -> None:
    atomic_write(path, content, mode)  # O_EXCL | O_NOFOLLOW temp file, fsync, rename


def _read_config(path: Path) -> str:
    """An ssh config file's text: a regular file (a FIFO would hang the read), UTF-8."""
    try:
        data = read_regular(path, 4 * 1024 * 1024, "OpenSSH config file", follow=True)
    except OSError as e:
        raise UsageError(f"cannot install the ssh_config: {printable(str(path))}: "
                         f"{e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise UsageError(f"cannot install the ssh_config: {printable(str(path))}:{line}: not "
                         "UTF-8 text; provision edits only a UTF-8 ssh config") from None


def install(text: str, ssh_dir: Path) -> list[str]:
    """Install `text` as ssh_dir/config.d/provision.conf (600, dir 700) and make
    ssh_dir/config include it. Idempotent; returns what changed, empty when nothing did.
    Everything is read and checked before the first write, so a refusal changes nothing."""
    for d in (ssh_dir, ssh_dir / "config.d"):
        if os.path.lexists(d) and not d.is_dir():  # else mkdir says only "File exists"
            raise UsageError(f"cannot install the ssh_config: {printable(str(d))} exists and is "
                             "not a directory (nor a symlink to one); move it away")
    config = ssh_dir / "config"
    target = config.resolve() if config.is_symlink() else config  # keep dotfile symlinks
    if config.is_symlink() and not target.exists():  # else we would create a file anywhere
        raise UsageError(f"cannot install the ssh_config: {printable(str(config))} is a symlink "
                         f"to {printable(str(target))}, which does not exist; fix the link")
    existing = _read_config(target) if os.path.lexists(target) else None
    conf = ssh_dir / "config.d" / CONF_NAME
    current = _read_config(conf) if conf.exists() else None
    changes: list[str] = []
    for d in (ssh_dir, ssh_dir / "config.d"):
        if not d.is_dir():
            d.mkdir(mode=0o700)
            os.chmod(d, 0o700)  # mkdir's mode is masked by the umask
            changes.append(f"created {d}/ (mode 700)")
    if current != text:
        _write_atomic(conf, text, 0o600)
        changes.append(f"{'wrote' if current is None else 'updated'} {conf}")
    elif conf.stat().st_mode & 0o777 != 0o600:
        os.chmod(conf, 0o600)
        changes.append(f"set mode 600 on {conf}")
    if existing is None:
        _write_atomic(target, f"{INCLUDE_LINE}\n", 0o600)
        changes.append(f"created {config} with '{INCLUDE_LINE}'")
    elif not has_include(existing):
        _write_atomic(target, with_include(existing), target.stat().st_mode & 0o777)
        changes.append(f"added '{INCLUDE_LINE}' at the top of {config}")
    return changes
