"""`provision recap merge FILE...`: one report from the `--json` recaps of several runs
(the shards of a fleet and the bastion run). Prints JSON; exit 1 when a host failed or was
unreachable in any of them, 2 when the reports overlap or are not of one run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from provision.errors import Exit, UsageError
from provision.shard import merge

from .common import EXIT_FAILED, EXIT_OK, emit_json


@click.group("recap")
def recap_group() -> None:
    """Work with `plan/apply --json` recaps."""


@recap_group.command("merge")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def merge_cmd(files: tuple[str, ...]) -> None:
    """Merge the --json recaps of shards (`apply --shard K/N --json > K.json`) into one."""
    reports = []
    for f in files:
        try:
            reports.append((f, json.loads(Path(f).read_text())))
        except OSError as e:
            raise UsageError(f"{f}: {e.strerror or e}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"{f}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    merged = merge(reports)
    emit_json(merged)
    raise Exit(EXIT_FAILED if merged["failed"] else EXIT_OK)
