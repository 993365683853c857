"""`provision import sg`: the account's security groups as inventory YAML.

Reads AWS (describe calls only) through `provision.cloud.aws`, turns the groups into
inventory YAML with the pure `provision.cloud.adopt`, reads that YAML back with the
inventory loader and compares it with what AWS answered (`provision.cloud.readback`),
and only then writes it to stdout or a file (replaced atomically). What cannot be
written, or does not read back, refuses the import (exit 1), naming the group and the
rule; nothing is written. Warnings (rules left out, kept as drift) go to stderr.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from provision.cloud import aws as shell
from provision.cloud.adopt import adopt, render
from provision.cloud.readback import read_back
from provision.errors import OperationError, UsageError
from provision.inventory.model import Aws
from provision.state import atomic_write
from provision.text import printable

from .common import echo, load


@click.command("sg")
@click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=True), default=None,
              metavar="PATH", help="read aws.region and aws.endpoint_url from this inventory")
@click.option("--region", default=None, help="AWS region (default: the inventory's aws.region)")
@click.option("--vpc", "vpcs", multiple=True, metavar="VPC_ID", help="every group in this VPC (repeatable)")
@click.option("--group", "groups", multiple=True, metavar="NAME|ID", help="this group (repeatable)")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write the YAML here (default: stdout)")
@click.option("--profile", default=None, metavar="NAME", help="AWS profile (default: the standard boto3 chain)")
def import_sg_cmd(inventory_path: str | None, region: str | None, vpcs: tuple[str, ...],
                  groups: tuple[str, ...], output: str | None, profile: str | None) -> None:
    """Write security groups (those of --vpc, those named by --group, else all in the region,
    plus every group they reference) as inventory YAML."""
    endpoint = None
    if inventory_path is not None or region is None:
        inv = load(inventory_path)
        if inv.aws is None and region is None:
            raise UsageError(f"{inv.source}: no aws.region in the inventory; pass --region")
        if inv.aws is not None:
            region, endpoint = region or inv.aws.region, inv.aws.endpoint_url
    assert region is not None
    if not re.match(r"^[a-z]{2}(-[a-z]+)+-\d$", region):  # the inventory's aws.region
        raise UsageError(f"--region {region!r} is not an AWS region name (e.g. us-east-1)")
    ec2 = shell.client(Aws(region, endpoint, ()), profile)
    live = shell.fetch_for_import(ec2, vpcs, groups)
    adopted = adopt(live, region)
    if adopted.refused:
        _refuse("what AWS holds cannot be written as inventory", adopted.refused)
    text = render(adopted)
    wrong = read_back(text, output or "<stdout>", live, adopted)
    if wrong:
        _refuse("the YAML, read back as an inventory, is not what AWS holds", wrong)
    for w in adopted.warnings:
        echo(f"warning: {w}", err=True)
    if output:
        _write(Path(output), text)
        echo(f"wrote {len(adopted.doc['aws']['security_groups'])} group(s) to {output}", err=True)
    else:
        click.echo(text, nl=False)


_SHOWN = 20  # lines of a refusal


def _refuse(what: str, lines: Sequence[str]) -> NoReturn:
    shown = [f"  {printable(line)}" for line in lines[:_SHOWN]]  # one line each, whatever AWS said
    if len(lines) > _SHOWN:
        shown.append(f"  ... and {len(lines) - _SHOWN} more")
    raise OperationError(f"import sg: {what}; nothing written:\n" + "\n".join(shown))


def _write(path: Path, text: str) -> None:
    """Replace the file atomically (a refusal or a crash leaves the old one), keeping its
    mode; through a symlink to its target; a device or FIFO (/dev/stdout) is written to."""
    target = Path(os.path.realpath(path))
    try:
        st = target.stat() if target.exists() else None
        if st is not None and not stat.S_ISREG(st.st_mode):
            with target.open("w", encoding="ascii") as f:
                f.write(text)
            return
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        atomic_write(target, text, mode)
    except OSError as e:
        raise OperationError(f"cannot write {path}: {e.strerror or e}") from None
