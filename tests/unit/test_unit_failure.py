"""A unit that does not start says why: what the batch prints is read back into the recap's
reason and `--json`'s `unit_failure`. The batch run by sh with stand-ins for `systemctl` and
`journalctl`: tests/integration/test_unit_failure_sh.py."""

from __future__ import annotations

from provision.tasks import script


def test_a_batch_without_units_does_not_pause() -> None:
    assert "provision_settled " not in script.build([]).replace("provision_settled() {", "")


def test_without_markers_keeps_only_what_the_commands_said() -> None:
    err = "apt said\n@unit-failed\tx\ta\tb\tc\n@journal\tj\n@unit-failed-end\nlast\n"
    assert script.without_markers(err) == "apt said\nlast"
    assert script.unit_failure("nothing here\n") is None
