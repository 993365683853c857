"""services step: what a host that already holds the rendered files plans (its records are built
from the step's own artifacts, so these stay Python). Fixed cases: tests/steps/services."""

from __future__ import annotations

from provision.facts import parse
from provision.steps.actions import (
    DaemonReload,
    EnableUnit,
    RestartUnit,
    StartUnit,
)
from provision.steps.services import ServicesStep
from tests.support.converge_cases import inventory
from tests.support.probe_records import answer, file_rec, unit_block, user_rec

JUPYTER = "provision-jupyter.service"
TB = "provision-tensorboard.service"
PORTS = {JUPYTER: (8888,), TB: (6006,)}  # the catalog's: what the settle check waits on


def step() -> ServicesStep:
    inv, host = inventory()
    return ServicesStep.build(inv, host)


def converged(since: int = 1700000100, mtime: int = 1700000000, **unit_kw: str) -> list[str]:
    s = step()
    recs: list[str] = [file_rec(a.path, a.content, f"{a.mode:o}", a.owner, a.group, mtime)
                       for a in s.artifacts]
    recs += ["dir\t/srv/runs\t755\tsvc-tensorboard\tsvc-tensorboard"]
    # each service's own account, made by provision for it
    recs += [user_rec(f"svc-{n}", 990 + i, f"/var/lib/provision-services/svc-{n}",
                      "/usr/sbin/nologin", comment="provision service")
             for i, n in enumerate(("jupyter", "tensorboard"))]
    for unit in (JUPYTER, TB):
        recs += [unit_block(unit, since=since, **unit_kw)]  # type: ignore[list-item]
    return recs  # type: ignore[return-value]


def test_only_the_hosts_service_units_are_managed() -> None:
    s = step()
    assert {a.service for a in s.artifacts} == {JUPYTER, TB}  # not the firewall's unit
    assert {a.kind for a in s.artifacts} == {"unit", "jupyter-config"}


def test_converged_is_a_no_op() -> None:
    assert step().diff(parse(answer(*converged()))) == []


def test_config_change_restarts_only_that_service_without_daemon_reload() -> None:
    recs = converged()
    i = next(i for i, r in enumerate(recs) if "jupyter_server_config.py" in r)
    recs[i] = file_rec("/etc/provision/jupyter/jupyter/jupyter_server_config.py", "old\n")
    acts = step().diff(parse(answer(*recs)))
    assert [type(a).__name__ for a in acts] == ["WriteFile", "RestartUnit"]
    assert acts[1] == RestartUnit(JUPYTER, "unit or config changed", PORTS[JUPYTER])


def test_unit_change_reloads_then_restarts_that_service() -> None:
    recs = converged()
    i = next(i for i, r in enumerate(recs) if TB in r and r.startswith("file"))
    recs[i] = file_rec(f"/etc/systemd/system/{TB}", "[Service]\nExecStart=/bin/false\n")
    acts = step().diff(parse(answer(*recs)))
    assert acts[1:] == [DaemonReload(), RestartUnit(TB, "unit or config changed", PORTS[TB])]


def test_stopped_and_disabled_service_is_started_and_enabled() -> None:
    recs = converged()
    recs = [r for r in recs if not (isinstance(r, list) and TB in r[0])]
    recs.append(unit_block(TB, active="failed", enabled="disabled"))  # type: ignore[arg-type]
    assert step().diff(parse(answer(*recs))) == [EnableUnit(TB), DaemonReload(), StartUnit(TB, PORTS[TB])]


def test_interrupted_run_is_finished() -> None:
    """Files already in place but newer than the process, or not reloaded: restart."""
    acts = step().diff(parse(answer(*converged(since=1700000000, mtime=1700000050))))
    assert acts == [RestartUnit(JUPYTER, "files newer than the running process", PORTS[JUPYTER]),
                    RestartUnit(TB, "files newer than the running process", PORTS[TB])]
    acts = step().diff(parse(answer(*converged(reload="yes"))))
    assert acts[0] == DaemonReload() and RestartUnit(JUPYTER, "unit file changed on disk", PORTS[JUPYTER]) in acts


