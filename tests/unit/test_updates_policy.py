"""The pure parts of `updates:` and pins: glob to unattended-upgrades' regex, the default
GPU set and the fragment that reads it, pin file names, the reboot finding."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from provision.exposure.reboot import reboot_findings
from provision.facts.updates import UpdatesFact
from provision.inventory.apt_policy import (
    GPU_PACKAGES,
    Updates,
    blacklist_regex,
    glob_matches,
    pin_file_name,
)
from provision.inventory.model import Host


@pytest.mark.parametrize(("glob", "name", "hit"), [
    ("libstdc++6", "libstdc++6", True),
    ("libstdc++6", "libstdcc6", False),  # '+' is the name's, not a quantifier
    ("lib.x", "libax", False),           # '.' too
    ("nvidia-*", "nvidia-driver-550", True),
    ("nvidia-*", "libnvidia-compute-550", False),  # anchored at the start, as re.match is
    ("*nvidia*", "libnvidia-compute-550", True),
    ("cuda-*", "cuda-toolkit-12-4-extra", True),
    ("datacenter-gpu-manager", "datacenter-gpu-manager-exporter", False),  # and at the end
])
def test_blacklist_regex_means_what_the_glob_means(glob: str, name: str, hit: bool) -> None:
    # unattended-upgrades tests each Package-Blacklist entry with re.match(regex, name)
    assert (re.match(blacklist_regex(glob), name) is not None) is hit
    assert glob_matches(glob, name) is hit


def test_the_fragment_reads_the_same_gpu_set() -> None:
    text = (files("provision._templates") / "facts" / "updates.sh").read_text()
    assert tuple(re.findall(r"'([^']+\*)'", text)) == GPU_PACKAGES


def test_gpu_default_only_where_gpu_packages_are() -> None:
    assert Updates().blacklist(["htop", "openssh-server"]) == ()
    assert Updates().blacklist(["htop", "libnvidia-compute-550"]) == GPU_PACKAGES
    assert Updates().blacklist(["cuda-toolkit-12-4"]) == GPU_PACKAGES
    assert Updates(never=()).blacklist(["libnvidia-compute-550"]) == ()
    assert Updates(never=("foo*",)).blacklist(["libnvidia-compute-550"]) == ("foo*",)


def test_pin_file_names_are_ones_apt_reads_and_never_collide() -> None:
    assert pin_file_name("libstdc++6") == "provision-libstdc__6.pref"
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", pin_file_name("libstdc++6"))


def _host(reboot: str = "never") -> Host:
    return Host("gpu1", "10.0.0.1", "root", 22, None, (), updates=Updates(reboot=reboot))


def test_a_pending_reboot_is_reported_with_its_time_and_packages() -> None:
    fact = UpdatesFact(reboot_since=1_800_000_000, reboot_packages=("libnvidia-compute-999",
                       "linux-image-6.1.0-99-amd64"), now=1_800_000_000 + 2 * 86400)
    (f,) = reboot_findings(_host(), fact)
    assert (f.severity, f.code, f.subject) == ("warning", "reboot-required", "gpu1")
    assert f.message == ("reboot required since 2027-01-15 08:00 UTC (2.0 days): "
                         "libnvidia-compute-999, linux-image-6.1.0-99-amd64 waiting")
    assert reboot_findings(_host(), UpdatesFact(now=1_800_000_000)) == []


def test_with_a_reboot_time_only_an_overdue_reboot_is_reported() -> None:
    fresh = UpdatesFact(reboot_since=1_800_000_000, now=1_800_000_000 + 3600)
    assert reboot_findings(_host("03:30"), fresh) == []
    late = UpdatesFact(reboot_since=1_800_000_000, now=1_800_000_000 + 3 * 86400)
    (f,) = reboot_findings(_host("03:30"), late)
    assert f.code == "reboot-overdue" and "the automatic reboot at 03:30 did not happen" in f.message
