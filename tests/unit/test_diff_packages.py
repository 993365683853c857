"""packages step: only what is missing is installed."""

from __future__ import annotations

from converge_cases import facts, inventory
from probe_records import answer

from provision.facts import parse
from provision.tasks.actions import AptUpdate, InstallPackages
from provision.tasks.packages import PackagesStep


def test_missing_package_installed_once() -> None:
    inv, host = inventory()
    s = PackagesStep(inv, host)
    assert [a for a in s.request().args() if a.startswith("P:")] == ["P:openssh-server", "P:htop"]
    # the fixture has no apt records: no package lists, so they are refreshed first
    assert s.diff(facts("fresh.txt")) == [AptUpdate("no package lists"), InstallPackages(("htop",))]


def test_removed_but_configured_package_counts_as_missing() -> None:
    inv, host = inventory()
    assert PackagesStep(inv, host).diff(facts("drifted.txt"))[-1] == InstallPackages(("htop",))


def test_all_installed_is_a_no_op() -> None:
    inv, host = inventory()
    text = answer("pkg\topenssh-server\tinstall ok installed\t1", "pkg\thtop\tinstall ok installed\t3")
    assert PackagesStep(inv, host).diff(parse(text)) == []
