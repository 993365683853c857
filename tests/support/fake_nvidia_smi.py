"""A stand-in `nvidia-smi` for a host without GPUs: a sh script that prints the lines a
recorded case of tests/facts/gpus/ holds (its `gpuline` records) and exits with the case's
status (its `gpusmi` record). It also leaves its arguments in `args_file`, so a test sees
the query the fragment asked for."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

CASES = Path(__file__).parent.parent / "facts" / "gpus"


def script(case: str, args_file: str, *, hang: bool = False) -> str:
    records = json.loads((CASES / f"{case}.json").read_text())["records"]
    lines = [r.split("\t", 1)[1] for r in records if r.startswith("gpuline\t")]
    status = next(r.split("\t", 1)[1] for r in records if r.startswith("gpusmi\t"))
    assert status.isdigit(), f"{case}: a case with nvidia-smi present"
    body = "".join(f"printf '%s\\n' {shlex.quote(ln)}\n" for ln in lines)
    return ("#!/bin/sh\n"
            f"printf '%s\\n' \"$@\" > {shlex.quote(args_file)}\n"
            + ("exec sleep 600\n" if hang else "")
            + body + f"exit {int(status)}\n")
