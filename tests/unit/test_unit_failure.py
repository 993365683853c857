"""A unit that does not start says why: what the batch prints is read back into the recap's
reason and `--json`'s `unit_failure`. The batch run by sh with stand-ins for `systemctl` and
`journalctl`: tests/integration/test_unit_failure_sh.py."""

from __future__ import annotations

from provision.steps import script
from provision.steps.actions import Action, RestartUnit, StartUnit


def test_a_batch_without_units_does_not_pause() -> None:
    assert "provision_settled " not in script.build([]).replace("provision_settled() {", "")


def test_the_settle_check_names_each_unit_once_with_its_ports() -> None:
    actions: list[Action] = [StartUnit("provision-a.service", (8888,)),
                             RestartUnit("provision-jupyter@bob.service", "r", (9001,)),
                             StartUnit("provision-plain.service"),
                             RestartUnit("provision-a.service", "again", (8888, 8889))]
    assert script.settle_args(actions) == [
        "provision-a.service=8888,8889", "provision-jupyter@bob.service=9001",
        "provision-plain.service"]
    lines = script.build(actions).splitlines()
    (call,) = [line for line in lines if line.startswith("provision_settled ")]
    assert call == ("provision_settled provision-a.service=8888,8889 "
                    "provision-jupyter@bob.service=9001 provision-plain.service")
    assert lines.index(call) == len(lines) - 4  # after the last start, before `@done`


def test_without_markers_keeps_only_what_the_commands_said() -> None:
    err = "apt said\n@unit-failed\tx\ta\tb\tc\n@journal\tj\n@unit-failed-end\nlast\n"
    assert script.without_markers(err) == "apt said\nlast"
    assert script.unit_failure("nothing here\n") is None
