"""`audit --cluster` (pure): the probes of a cluster, iperf3's real reports (recorded in the
lab: tests/fixtures/iperf3/) read into results, the matrix and the heat map's grid."""

from __future__ import annotations

from pathlib import Path

import yaml

from provision import cluster_matrix as CM
from provision.cluster_plot import grid
from provision.inventory import load_inventory
from provision.inventory.model import Inventory

IPERF = Path(__file__).parent.parent / "fixtures" / "iperf3"
DOC = {
    "version": 1, "defaults": {"user": "ubuntu"},
    "bastions": {"jump": {"address": "10.0.0.5", "allow_ssh_from": ["10.9.0.0/24"]}},
    "hosts": {"gpu1": {"address": "10.0.1.21", "via": "jump"},
              "gpu2": {"address": "10.0.1.22", "via": "jump"},
              "gpu3": {"address": "10.0.1.23", "via": "jump"}},
    "clusters": {"train": {"hosts": ["gpu1", "gpu2", "gpu3"],
                           "ephemeral_ports": [40000, 40999]}},
}


def inv(tmp_path: Path) -> Inventory:
    p = tmp_path / "inventory.yml"
    p.write_text(yaml.safe_dump(DOC))
    return load_inventory(p)


def test_every_ordered_pair_then_the_bastion_on_both_ports(tmp_path: Path) -> None:
    i = inv(tmp_path)
    c = i.cluster("train")
    assert c is not None
    ps = CM.probes(i, c)
    pairs = {(p.source, p.target) for p in ps}
    assert len(ps) == 2 * (3 * 2 + 3)  # 6 member pairs and the bastion to 3, two ports each
    assert ("gpu1", "gpu1") not in pairs and ("jump", "gpu3") in pairs
    assert {p.port for p in ps} == {29500, 40499}
    assert all(p.member == (p.source != "jump") for p in ps)
    assert CM.client_command(ps[1], 2.0) == ("exec iperf3 -c 10.0.1.22 -p 40499 -t 2 -J "
                                              "--connect-timeout 3000")
    assert CM.client_command(ps[0], 2.0).endswith("-n 64K -J --connect-timeout 3000")


def _probe(member: bool = True, kind: str = "ephemeral") -> CM.Probe:
    return CM.Probe("gpu2", "gpu1", "10.0.1.21", 40499, kind, member)  # type: ignore[arg-type]


def test_iperf3_reports_read_as_results() -> None:
    r = CM.result(_probe(), 0, (IPERF / "open.json").read_text())
    assert r.reach == "open" and r.ok and r.gbps is not None and r.gbps > 1
    assert r.rtt_ms is not None and 0 < r.rtt_ms < 10
    refused = CM.result(_probe(), 1, (IPERF / "refused.json").read_text())
    assert (refused.reach, refused.ok) == ("closed", False)
    assert "Connection refused" in refused.why
    dropped = CM.result(_probe(member=False), 1, (IPERF / "dropped.json").read_text())
    assert (dropped.reach, dropped.ok) == ("closed", True)  # an outsider shut out: the pass
    garbage = CM.result(_probe(), 1, "iperf3: error - unable to start")
    assert garbage.reach == "error" and not garbage.ok


def test_the_matrix_names_each_failure(tmp_path: Path) -> None:
    i = inv(tmp_path)
    c = i.cluster("train")
    assert c is not None
    results = [CM.Result(p, "open" if p.member and p.target != "gpu3" else "closed",
                         gbps=9.5 if p.member and p.kind == "ephemeral" else None, rtt_ms=0.1)
               for p in CM.probes(i, c)]
    rows = CM.matrix(c, results)
    assert rows[0] == ["from \\ to", "gpu1", "gpu2", "gpu3"]
    assert rows[1][2] == "9.50 Gb/s 0.10 ms ok" and rows[1][3].endswith("FAIL")
    assert rows[4][0] == "jump" and rows[4][1] == "closed/closed ok"
    failed = CM.failures(results)
    assert len(failed) == 4 and all("gpu3" in f and "should be open" in f for f in failed)
    g = grid(c, results)
    assert g[0][0] is None and g[0][1] == 9.5 and g[0][2] is None


def test_a_server_that_could_not_listen_is_busy() -> None:
    assert CM.busy("iperf3: error - unable to start listener for connections: "
                   "Address already in use")
    assert CM.READY.search("Server listening on 40499 (test #1)")
