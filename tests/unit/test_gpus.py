"""The GPUs: audit's findings, the plan's line and the members' `gpus` check, on the recorded
nvidia-smi outputs of tests/facts/gpus/ (README there: which are quoted from where)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provision.exposure.gpus import gpu_findings
from provision.facts import Facts, parse
from provision.facts.gpus import Gpus, bus_key
from provision.inventory import load_inventory
from provision.steps.member_servers import gpu_warnings, missing_gpus
from provision.steps.refused import Refused
from tests.support.probe_records import expand, wrap

CASES = Path(__file__).parent.parent / "facts" / "gpus"
# gpu1, where alice's server has gpus: [1]
HOST = load_inventory(Path(__file__).parent.parent / "fixtures" / "member_servers" /
                      "inventory.yml").node("gpu1")


def fact(case: str) -> Gpus:
    records = json.loads((CASES / f"{case}.json").read_text())["records"]
    gpus: Gpus = parse(wrap(expand(records))).values["gpus"]
    return gpus


def codes(case: str) -> list[tuple[str, str, str]]:
    return [(f.severity, f.code, f.subject) for f in gpu_findings(HOST, fact(case))]


def test_a_healthy_host_has_no_findings_and_one_line() -> None:
    assert codes("eight") == []
    assert fact("eight").summary == "gpus: 8 × NVIDIA H100 80GB HBM3, driver 550.90.07"
    assert fact("one").summary == "gpus: 1 × GeForce RTX 2080, driver 440.64"


def test_a_host_without_nvidia_smi_reports_none() -> None:
    g = fact("none")
    assert (g.present, g.devices, g.summary, codes("none")) == (False, (), "", [])
    # a GPU on the bus without a driver is said, not an error
    assert codes("none-driver-not-installed") == [("info", "gpu-no-driver", "gpu1")]


def test_a_driver_library_mismatch_is_an_error_naming_both_versions() -> None:
    found = gpu_findings(HOST, fact("mismatch"))
    assert [(f.severity, f.code) for f in found] == [("error", "gpu-driver-mismatch")]
    assert "kernel module 570.124.06, user-space library 570.195.03" in found[0].message
    assert fact("mismatch").summary == ("gpus: driver/library version mismatch (kernel module "
                                        "570.124.06, library 570.195.03)")


def test_versions_that_differ_are_a_mismatch_even_before_nvidia_smi_says_so() -> None:
    g = fact("eight")
    assert not g.mismatch
    from dataclasses import replace
    assert replace(g, library="550.100").mismatch


def test_a_gpu_off_the_bus_is_an_error_with_nvidia_smis_words() -> None:
    found = gpu_findings(HOST, fact("fallen-off"))
    assert [(f.severity, f.code, f.subject) for f in found] == [
        ("error", "gpu-off-the-bus", "gpu1/0000:db:00.0")]
    assert "GPU is lost. Reboot the system to recover this GPU" in found[0].message
    assert fact("fallen-off").summary.endswith("; 1 off the bus")
    assert codes("unknown-error-no-space") == [("error", "gpu-off-the-bus", "gpu1/0000:4f:00.0")]


def test_a_gpu_on_the_bus_that_nvidia_smi_does_not_list_is_off_the_bus() -> None:
    found = gpu_findings(HOST, fact("missing-from-listing"))
    assert [(f.code, f.subject) for f in found] == [("gpu-off-the-bus", "gpu1/0000:3b:00.0")]
    assert "not listed by nvidia-smi" in found[0].message


def test_persistence_off_and_ecc_errors_are_warnings() -> None:
    assert codes("eight-degraded") == [("warning", "gpu-persistence-off", "gpu1"),
                                       ("warning", "gpu-ecc-uncorrected", "gpu1/gpu3")]
    found = gpu_findings(HOST, fact("eight-degraded"))
    assert "GPU 1, 2 (of 8)" in found[0].message
    assert "2 uncorrected ECC error(s)" in found[1].message
    assert codes("one") == []  # "[N/A]" ECC (a GeForce) is no error


def test_nvidia_smi_that_hangs_is_an_error() -> None:
    assert codes("timeout") == [("error", "gpu-smi-timeout", "gpu1")]


def test_bus_ids_are_compared_in_one_spelling() -> None:
    assert bus_key("00000000:DB:00.0") == bus_key("0000:db:00.0") == "0000:db:00.0"
    assert bus_key("DB:00.0") == "0000:db:00.0"
    assert bus_key("../../etc") is None


def test_members_gpus_are_checked_against_what_nvidia_smi_lists() -> None:
    missing_gpus("alice", (0, 7), fact("eight"))  # there
    with pytest.raises(Refused, match=r"alice's gpus \[8\] do not exist on this host "
                                      r"\(nvidia-smi lists 8 GPU\(s\): 0, 1, 2, 3, 4, 5, 6, 7; "
                                      r"NVIDIA H100 80GB HBM3\)"):
        missing_gpus("alice", (0, 8), fact("eight"))
    with pytest.raises(Refused, match=r"gpus \[7\] .* 0, 1, 2, 3, 4, 5, 6; NVIDIA H100 80GB "
                                      r"HBM3; 1 more off the bus\)"):
        missing_gpus("alice", (7,), fact("fallen-off"))
    # nothing listed for sure: not refused (a note says why, audit reports the cause)
    missing_gpus("alice", (0,), fact("mismatch"))
    missing_gpus("alice", (0,), fact("none"))


def test_what_could_not_be_checked_is_noted() -> None:
    def notes(case: str) -> list[str]:
        return gpu_warnings(HOST, Facts({"gpus": fact(case)}))

    assert notes("eight") == []
    assert notes("none") == ["gpus of alice not checked: no nvidia-smi on this host"]
    assert notes("mismatch") == ["gpus of alice not checked: nvidia-smi failed (driver/library "
                                 "version mismatch (kernel module 570.124.06, library 570.195.03))"]
