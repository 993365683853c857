"""Record reconciliation as steps: read each zone, plan it, apply it, wait for it.

The imperative shell around `zone_plan.plan_zone`: it calls providers (I/O) and the pure
planner, and reports what happened as data. Printing is the command's job. Providers are
made by `make_provider` (tests inject their own, e.g. with a hook between read and write).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provision.dns.provider import Provider, ProviderError, StaleRead, provider_for
from provision.dns.rrset import RRset, absolute, desired
from provision.dns.zone_plan import ZonePlan, plan_zone
from provision.frozen import frozen
from provision.inventory.model import Inventory, Zone

from .migrate.guard import Review, review

MakeProvider = Callable[[Zone, Inventory], Provider]


@dataclass
class ZoneRun:
    zone: Zone
    provider: Provider | None = None
    plan: ZonePlan | None = None
    review: Review | None = None        # cutovers, refused reverts, expired closed records
    error: str = ""
    owner: str | None = None            # the inventory's owner id (dns.owner)
    read_seconds: float = 0.0
    records_read: int = 0
    # after apply
    applied: bool = False
    replanned: bool = False
    apply_seconds: float = 0.0


def _default_provider(zone: Zone, inv: Inventory) -> Provider:
    return provider_for(zone, inv)


def select_zones(inv: Inventory, names: Sequence[str]) -> list[Zone]:
    """The inventory's zones, or those named (KeyError for an unknown name)."""
    zones = list(inv.dns.zones) if inv.dns else []
    if not names:
        return zones
    wanted = [n.rstrip(".").lower() for n in names]
    by_name = {z.name: z for z in zones}
    for n in wanted:
        if n not in by_name:
            raise KeyError(n)
    return [by_name[n] for n in wanted]


@frozen
class Options:
    """How the migration guard reviews a plan (`dns plan|apply --force --no-migrate
    --allow-revert NAME`)."""

    force: bool = False                       # the 30 % guard only
    no_migrate: bool = False
    allow_revert: tuple[str, ...] = ()        # names (as given) whose revert is on purpose
    now: Callable[[], float] = time.time


def _plan(run: ZoneRun, actual: Sequence[RRset], opts: Options) -> ZonePlan:
    want = desired(run.zone)
    run.review = review(run.zone.name, want, actual, opts.now(),
                        cutover_above_ttl=run.zone.cutover_above_ttl,
                        allow_revert=frozenset(absolute(n, run.zone.name)
                                               for n in opts.allow_revert),
                        no_migrate=opts.no_migrate,
                        closed_migration_days=run.zone.closed_migration_days)
    return plan_zone(run.zone.name, want, actual, hold=run.review.hold,
                     expire=run.review.expire, owner=run.owner)


def plan_zones(inv: Inventory, zones: Sequence[Zone],
               make_provider: MakeProvider = _default_provider,
               opts: Options = Options()) -> list[ZoneRun]:
    runs = []
    for zone in zones:
        run = ZoneRun(zone, owner=inv.dns.owner if inv.dns is not None else None)
        try:
            run.provider = make_provider(zone, inv)
            t0 = time.perf_counter()
            actual = run.provider.list_rrsets()
            run.read_seconds = time.perf_counter() - t0
            run.records_read = len(actual)
            run.plan = _plan(run, actual, opts)
        except ProviderError as e:
            run.error = e.message
        runs.append(run)
    return runs


def apply_zone(run: ZoneRun, *, timeout: float = 120.0,
               force: bool = False, opts: Options | None = None) -> None:
    """Apply `run.plan` and wait until the provider serves it. Cloud DNS style providers
    (`capabilities.replan_on_stale`) re-read and re-plan once when the zone changed under us; the
    others fail with StaleRead. Raises ProviderError."""
    provider, plan = run.provider, run.plan
    assert provider is not None and plan is not None
    if not plan.change_set:
        return
    t0 = time.perf_counter()
    try:
        token = provider.apply(plan.change_set)
    except StaleRead:
        if not provider.capabilities.replan_on_stale:
            raise
        actual = provider.list_rrsets()
        plan = _plan(run, actual, opts or Options(force=force))
        run.plan, run.replanned = plan, True
        if run.review is not None and run.review.reverts:
            raise ProviderError(f"{run.zone.name}: the zone changed while applying, and the "
                                f"new plan would undo a migration: "
                                f"{'; '.join(run.review.reverts)}") from None
        if plan.refused:
            raise ProviderError(f"{run.zone.name}: the zone changed while applying, and the new "
                                f"plan is refused: {'; '.join(plan.errors)}") from None
        if plan.guard and not force:
            raise ProviderError(f"{run.zone.name}: the zone changed while applying, and the new "
                                f"plan needs --force: {plan.guard}") from None
        if not plan.change_set:
            run.applied = True
            run.apply_seconds = time.perf_counter() - t0
            return
        try:
            token = provider.apply(plan.change_set)
        except StaleRead as e:
            raise ProviderError(f"{e.message} (again after re-reading the zone once; giving up)") from None
    provider.wait(plan.change_set, token, timeout)
    run.applied = True
    run.apply_seconds = time.perf_counter() - t0
