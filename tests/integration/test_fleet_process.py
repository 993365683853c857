"""Fleets and shards across processes: the same shard in every process, plan refusing a bad
shard before it connects, the recap merge command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from provision.shard import shard_of
from tests.unit.test_fleet import NAMES, _report

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "example.yml"


# --- --shard ----------------------------------------------------------------------------


def test_the_same_shard_every_time_and_in_every_process() -> None:
    here = {name: shard_of(name, 8) for name in NAMES}
    code = ("import json, sys; from provision.shard import shard_of; "
            f"print(json.dumps({{n: shard_of(n, 8) for n in {NAMES!r}}}))")
    for seed in ("0", "12345"):  # Python's own hash() would differ between these
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PYTHONHASHSEED": seed}, check=True)
        assert json.loads(out.stdout) == here
    # pinned: a change of the hash would silently move every host to another runner
    assert [shard_of(f"gpu{i}", 4) for i in range(1, 9)] == [2, 3, 2, 4, 4, 4, 2, 2]
    assert shard_of("gpu1", 1) == 1


def test_plan_refuses_a_bad_shard_before_connecting() -> None:
    r = subprocess.run([sys.executable, "-m", "provision", "plan", "-i", str(EXAMPLE),
                        "--shard", "5/4"], capture_output=True, text=True)
    assert r.returncode == 2 and "K/N" in r.stderr


# --- recap merge ------------------------------------------------------------------------


def test_recap_merge_command(tmp_path: Path) -> None:
    a, b = tmp_path / "1.json", tmp_path / "2.json"
    a.write_text(json.dumps(_report("1/2", {"gpu1": "changed"})))
    b.write_text(json.dumps(_report("2/2", {"gpu2": "ok"})))
    r = subprocess.run([sys.executable, "-m", "provision", "recap", "merge", str(a), str(b)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"] == {"changed": 1, "ok": 1}
    b.write_text(json.dumps(_report("2/2", {"gpu2": "failed"})))
    r = subprocess.run([sys.executable, "-m", "provision", "recap", "merge", str(a), str(b)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    b.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "provision", "recap", "merge", str(a), str(b)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "not JSON" in r.stderr
