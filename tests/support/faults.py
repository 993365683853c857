"""Test-only entry point: provision's CLI with faults injected. Never shipped.

    python tests/support/faults.py [--sshd-extra LINE]... [--sleep-before-confirm S]
                                   [--pause-until PATH] [--kill-after-phase PHASE]
                                   [--kill-after-change N] [--count-in-flight FILE]
                                   [--batch-output FILE] [--hold-dir DIR]
                                   [--retry-window S]
                                   -- <provision arguments>

Patches the step factory, the confirmation and the script builder of the installed
package, then calls `provision.cli.main` with the remaining arguments. The lab tests use
it to force lockouts (a valid sshd config that refuses the operator, an invalid one), to
cut the operator off mid-apply, and to kill a run while a temp file exists (`--pause-until
PATH` holds every rename of the batch until PATH exists on the host: a stand-in that keeps
running for as long as the test needs, where a fixed pause raced a busy machine). The
`dns migrate` crash tests kill the process (SIGKILL: no cleanup runs) right after the
journal is written with a phase, or right after the Nth provider change returned and
before the journal records it. `--count-in-flight FILE` is instrumentation, not a fault: it
counts the hosts being worked on at once (connect + probe, and apply) and writes the largest
count to FILE as JSON. `--batch-output FILE` is instrumentation too: it appends the stdout
of every plain batch (its `@step`/`@settled`/`@done` progress lines) to FILE.
`--retry-window S` gives up on a host still booting after S seconds instead of provision's
RETRY_WINDOW (45 s): a test of the retries need not wait the whole window out.
`--hold-dir DIR` holds the run at named points until the test lets it go: before each
wave (`wave-0`, `wave-1`, ...), before each host's confirmation (`confirm-HOST`), and in
`dns apply` before each zone's change set is sent (`dns-ZONE`), in `sg apply` as each change
starts (`sg-create`, `sg-rules-GROUP`, `sg-delete-GROUP`, ...), and in `dns migrate` when
the journal is first written with a phase the test asked for by creating
`DIR/migrate-PHASE.hold` (`migrate-PHASE`), it creates
`DIR/NAME.reached` and waits until `DIR/NAME.go` exists (at most 10 min), so a test can
send SIGINT at exactly that point (tests/lab/test_interrupt.py,
tests/integration/test_dns_interrupt.py, tests/cloud/test_sg_interrupt.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any


def sshd_with_extra(step: Any, lines: list[str]) -> Any:
    """An SshdStep whose rendered drop-in carries `lines` at its end."""
    art = step.artifact
    content = art.content + "# fault injected by tests/support/faults.py\n" + "".join(
        f"{line}\n" for line in lines)
    return dataclasses.replace(step, artifact=dataclasses.replace(art, content=content))


def install(sshd_extra: list[str], sleep_before_confirm: float, pause_until: str) -> None:
    from provision.hosts import confirm as confirm_mod
    from provision.steps import script
    from provision.steps.registry import STEPS
    from provision.steps.sshd import SshdStep

    if sshd_extra:
        STEPS["sshd"] = lambda inv, host: sshd_with_extra(SshdStep.build(inv, host), sshd_extra)
    if sleep_before_confirm:
        real_confirm = confirm_mod.confirm

        def late_confirm(*args: Any, **kwargs: Any) -> Any:
            time.sleep(sleep_before_confirm)
            return real_confirm(*args, **kwargs)

        confirm_mod.confirm = late_confirm  # type: ignore[assignment]
    if pause_until:
        real_build = script.build
        # at most 10 min: a batch the test forgot is gone by the lab's tear-down anyway
        pause = (f"i=0; while ! test -e '{pause_until}' && test $i -lt 6000; do sleep 0.1; "
                 "i=$((i+1)); done; ")

        def slow_build(actions: Any) -> str:
            # the renames of templates/steps/files.sh: by root, and as a member in their home
            return (real_build(actions).replace('mv -fT -- "$fw_t"', pause + 'mv -fT -- "$fw_t"')
                    .replace('mv -fT -- "$t" "$2"', pause + 'mv -fT -- "$t" "$2"'))

        script.build = slow_build  # type: ignore[assignment]


def kill_migrations(after_phase: str, after_change: int) -> None:
    import os
    import signal

    from provision.dns.migrate import run as migrate_run
    from provision.dns.migrate.store import JournalStore

    def die() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    if after_phase:
        real_save = JournalStore.save

        def save_then_die(self: Any, j: Any) -> None:
            real_save(self, j)
            if j.phase == after_phase:
                die()

        JournalStore.save = save_then_die  # type: ignore[method-assign]
    if after_change:
        real_apply = migrate_run.apply_change
        calls = [0]

        def apply_then_die(provider: Any, changes: Any) -> str:
            token = real_apply(provider, changes)
            calls[0] += 1
            if calls[0] == after_change:
                die()
            return token

        migrate_run.apply_change = apply_then_die


class InFlight:
    """Hosts inside a wrapped function at once: now, and the most seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def wrap(self, fn: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.now -= 1
        return counted


def count_in_flight() -> InFlight:
    from provision.hosts import confirm as confirm_mod
    from provision.hosts import converge as converge_mod

    counter = InFlight()
    converge_mod.prepare = counter.wrap(converge_mod.prepare)  # type: ignore[method-assign]
    confirm_mod.execute_guarded = counter.wrap(confirm_mod.execute_guarded)  # type: ignore[method-assign]
    return counter


def tee_batch_output(path: Path) -> None:
    """Append each plain batch's stdout (its progress lines) to `path` as it is parsed."""
    from provision.steps import script

    real_parse = script.parse_progress
    lock = threading.Lock()

    def parse_and_keep(stdout: str) -> tuple[int, bool]:
        with lock, path.open("a", encoding="utf-8") as f:
            f.write(stdout)
        return real_parse(stdout)

    script.parse_progress = parse_and_keep


def retry_window(seconds: float) -> None:
    """A host still booting (or shedding load) is given up on after `seconds` instead of
    provision's RETRY_WINDOW: the same retries and the same reason, sooner. Set on the
    function's defaults, so every caller that leaves the window to it gets it."""
    from provision.hosts import reach

    defaults = reach.open_chain.__defaults__
    assert defaults is not None
    reach.open_chain.__defaults__ = (seconds, *defaults[1:])


def _hold(d: Path, name: str) -> None:
    if (d / f"{name}.reached").exists():  # once per name
        return
    (d / f"{name}.reached").touch()
    deadline = time.monotonic() + 600
    while not (d / f"{name}.go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def hold_at(d: Path) -> None:
    """Stop before each wave and each confirmation until the test says go."""
    from provision.hosts import confirm as confirm_mod
    from provision.hosts import run_phases

    real_waves = run_phases.waves

    def held_waves(items: Any, host_of: Any) -> Any:
        for k, wave in enumerate(real_waves(items, host_of)):
            _hold(d, f"wave-{k}")
            yield wave

    run_phases.waves = held_waves  # type: ignore[assignment]
    real_confirm = confirm_mod.confirm

    def held_confirm(inv: Any, run: Any, *args: Any, **kwargs: Any) -> Any:
        _hold(d, f"confirm-{run.host.name}")
        return real_confirm(inv, run, *args, **kwargs)

    confirm_mod.confirm = held_confirm  # type: ignore[assignment]
    hold_dns(d)
    hold_sg(d)


def hold_sg(d: Path) -> None:
    """`sg apply`: hold as each change starts (`sg-create`, `sg-revoke-GROUP`, `sg-rules-GROUP`,
    `sg-attach-MACHINE`, `sg-confirm`, `sg-delete-GROUP`, `sg-placement-NAME`): the change
    is in flight, the next not started."""
    from provision.cloud import apply as sg_engine

    def held_begin(unit: Any) -> None:
        _hold(d, f"sg-{unit.kind}" if unit.kind in ("create", "confirm")
              else f"sg-{unit.kind}-{unit.name}")

    sg_engine.begin = held_begin


def hold_dns(d: Path) -> None:
    """`dns apply`: hold inside each zone's apply, before its change set is sent
    (`dns-ZONE`: the zone is in flight, the next not started)."""
    from provision.commands import dns as dns_cmd

    real_apply_zone = dns_cmd.apply_zone

    def held_apply_zone(run: Any, **kwargs: Any) -> None:
        _hold(d, f"dns-{run.zone.name}")
        real_apply_zone(run, **kwargs)

    dns_cmd.apply_zone = held_apply_zone
    from provision.dns.migrate.store import JournalStore

    real_save = JournalStore.save

    def held_save(self: Any, j: Any) -> None:
        real_save(self, j)
        if (d / f"migrate-{j.phase}.hold").exists():  # only where the test asked
            _hold(d, f"migrate-{j.phase}")

    JournalStore.save = held_save  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: faults.py [fault options] -- <provision arguments>", file=sys.stderr)
        return 2
    split = argv.index("--")
    p = argparse.ArgumentParser(prog="faults.py")
    p.add_argument("--sshd-extra", action="append", default=[])
    p.add_argument("--sleep-before-confirm", type=float, default=0.0)
    p.add_argument("--pause-until", default="")
    p.add_argument("--kill-after-phase", default="")
    p.add_argument("--kill-after-change", type=int, default=0)
    p.add_argument("--count-in-flight", type=Path, default=None)
    p.add_argument("--batch-output", type=Path, default=None)
    p.add_argument("--hold-dir", type=Path, default=None)
    p.add_argument("--retry-window", type=float, default=0.0)
    opts = p.parse_args(argv[:split])
    if opts.retry_window:
        retry_window(opts.retry_window)
    if opts.hold_dir is not None:
        hold_at(opts.hold_dir)
    if opts.batch_output is not None:
        tee_batch_output(opts.batch_output)
    install(opts.sshd_extra, opts.sleep_before_confirm, opts.pause_until)
    if opts.kill_after_phase or opts.kill_after_change:
        kill_migrations(opts.kill_after_phase, opts.kill_after_change)
    counter = count_in_flight() if opts.count_in_flight else None
    from provision.cli import main as provision_main

    try:
        return int(provision_main(argv[split + 1:], prog_name="provision", standalone_mode=True) or 0)
    finally:
        if counter is not None and opts.count_in_flight is not None:
            opts.count_in_flight.write_text(json.dumps({"most": counter.most}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
