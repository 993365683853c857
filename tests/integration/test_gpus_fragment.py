"""templates/facts/gpus.sh run by a real sh, with a stand-in nvidia-smi on PATH printing a
recorded case (tests/support/fake_nvidia_smi.py): the query it sends, the records it prints
and their parse; a host without nvidia-smi reports none; one that hangs is cut off."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from provision.facts import Request, parse, probe_script
from provision.facts.gpus import Gpus
from tests.support import fake_nvidia_smi as F

QUERY = ("--query-gpu=index,name,uuid,driver_version,memory.total,persistence_mode,"
         "ecc.errors.uncorrected.volatile.total,pci.bus_id")


def probe(bin_dir: Path | None) -> tuple[Gpus, float]:
    # PATH without the machine's own bin directories' nvidia-smi (none on this machine, and
    # the stand-in goes first)
    path = os.environ["PATH"] if bin_dir is None else f"{bin_dir}:{os.environ['PATH']}"
    started = time.monotonic()
    out = subprocess.run(["sh", "-s", "--"], input=probe_script(Request(facts=("gpus",))),
                         capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PATH": path})
    gpus: Gpus = parse(out.stdout).values["gpus"]
    return gpus, time.monotonic() - started


def fake(tmp_path: Path, case: str, *, hang: bool = False) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(F.script(case, str(tmp_path / "args"), hang=hang))
    smi.chmod(0o755)
    return bin_dir


def test_eight_gpus_through_the_real_fragment(tmp_path: Path) -> None:
    gpus, _ = probe(fake(tmp_path, "eight"))
    assert gpus.smi == "ok" and len(gpus.devices) == 8
    assert gpus.summary == "gpus: 8 × NVIDIA H100 80GB HBM3, driver 550.90.07"
    assert (tmp_path / "args").read_text().split("\n")[:2] == [
        QUERY, "--format=csv,noheader,nounits"]


def test_a_mismatch_through_the_real_fragment(tmp_path: Path) -> None:
    gpus, _ = probe(fake(tmp_path, "mismatch"))
    assert (gpus.smi, gpus.status, gpus.devices) == ("failed", 18, ())
    assert gpus.mismatch


def test_a_lost_gpu_through_the_real_fragment(tmp_path: Path) -> None:
    gpus, _ = probe(fake(tmp_path, "fallen-off"))
    assert len(gpus.devices) == 7 and [g.bus_id for g in gpus.lost] == ["0000:DB:00.0"]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_no_nvidia_smi_reports_none() -> None:
    gpus, _ = probe(None)
    assert (gpus.smi, gpus.devices, gpus.summary) == ("absent", (), "")


def test_an_nvidia_smi_that_hangs_is_cut_off(tmp_path: Path) -> None:
    gpus, seconds = probe(fake(tmp_path, "eight", hang=True))
    assert (gpus.smi, gpus.status, gpus.devices) == ("timeout", 124, ())
    assert seconds < 30  # `timeout 10`, not the stand-in's 600 s
