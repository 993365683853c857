"""Fleet scale, the pure parts and the connect cap: `--forks` sizing, connects per bastion
below sshd's MaxStartups, `--shard K/N`, and merging the shards' `--json` recaps."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from provision.errors import UsageError
from provision.inventory.model import Host
from provision.shard import Shard, merge, parse_shard, split
from provision.ssh import connect as C
from provision.ssh.fanout import MAX_FORKS, MIN_FORKS, connect_slots, default_forks

# --- --forks ----------------------------------------------------------------------------

def test_default_forks_grows_with_cpus_and_is_bounded_by_open_files() -> None:
    assert default_forks(2, 1024) == 32
    assert default_forks(8, 1_048_576) == 128
    assert default_forks(64, None) == MAX_FORKS
    assert default_forks(2, 256) == (256 - 64) // 8  # 24: the file limit wins
    assert default_forks(1, 16) == MIN_FORKS  # never below the minimum
    assert default_forks(None, None) == 16  # unknown CPU count: one
    assert all(MIN_FORKS <= default_forks(c, n) <= MAX_FORKS
               for c in (1, 2, 4, 1000) for n in (None, 0, 64, 100, 4096, 10**7))


def test_connect_slots_stay_below_max_startups() -> None:
    assert connect_slots() == 8
    assert connect_slots("10:30:100") == 8
    assert connect_slots("20") == 18
    assert connect_slots("2:30:10") == 1
    with pytest.raises(ValueError):
        connect_slots("many")


def _host(name: str, bastion: bool = False, chain: tuple[str, ...] = ()) -> Host:
    return Host(name, f"10.0.0.{len(name)}" if bastion else name, "u", 22, None, chain,
                is_bastion=bastion)


def test_connects_through_one_bastion_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """24 threads connect at once through one bastion: at most connect_slots() of them are
    connecting to it at any moment (the cap is held while the bastion hop opens)."""
    bastion = _host("jump", bastion=True)
    inside = [0]
    most = [0]
    lock = threading.Lock()

    class FakeChannelOpener:
        def open_channel(self, *args: Any, **kwargs: Any) -> Any:
            return object()

    class FakeConn:
        client: Any = None
        is_connected = True
        transport = FakeChannelOpener()

        def __init__(self, node: Host) -> None:
            self.node = node

        def open(self) -> None:
            if not self.node.is_bastion:  # the host behind: its own sshd, not capped
                time.sleep(0.02)
                return
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1

        def close(self) -> None:
            pass

    class Inv:
        def chain(self, host: Host) -> list[Host]:
            return [] if host.is_bastion else [bastion]

    errors: list[BaseException] = []

    def connect(host: Host) -> None:
        try:
            C.connect(Inv(), host)  # type: ignore[arg-type]
        except BaseException as e:
            errors.append(e)

    monkeypatch.setattr(C, "_connection",
                        lambda node, login, gateway, store, sock=None: FakeConn(node))
    monkeypatch.setattr(C, "KnownHosts", lambda *a, **k: None)
    monkeypatch.setattr(C, "inventory_known_hosts", lambda inv: Path("/dev/null"))
    monkeypatch.setattr(C, "_slots", {})
    hosts = [_host(f"gpu{i}", chain=("jump",)) for i in range(24)] + [bastion]
    threads = [threading.Thread(target=connect, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert 1 < most[0] <= connect_slots()


def test_a_bastion_that_fails_to_open_fails_the_waiting_hosts_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """16 hosts ask for the shared hop while it is being opened and fails: one attempt, and
    every waiting host gets that error (not 16 attempts in turn behind the hop's lock). A
    host asking after the failure tries again, and succeeds once the bastion is back."""
    bastion = _host("jump", bastion=True)
    attempts = [0]
    down = [True]

    class FakeConn:
        client: Any = None
        is_connected = False

        def __init__(self, node: Host) -> None:
            self.node = node

        def open(self) -> None:
            attempts[0] += 1
            time.sleep(0.3)
            if down[0]:
                raise OSError("timed out")
            self.is_connected = True

        def close(self) -> None:
            pass

    monkeypatch.setattr(C, "_connection", lambda node, login, gateway, store: FakeConn(node))
    monkeypatch.setattr(C, "_slots", {})
    gateways = C.Gateways()
    barrier = threading.Barrier(16)
    errors: list[BaseException] = []

    def host() -> None:
        barrier.wait()
        try:
            gateways.hop((bastion,), None)  # type: ignore[arg-type]
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=host) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert attempts[0] == 1
    assert len(errors) == 16 and all("timed out" in str(e) for e in errors)
    down[0] = False
    assert gateways.hop((bastion,), None).is_connected  # type: ignore[arg-type]
    assert attempts[0] == 2


# --- --shard ----------------------------------------------------------------------------

NAMES = [f"gpu{i}" for i in range(1, 1001)] + ["a", "node-7.rack-3", "é"]


@pytest.mark.parametrize("n", [1, 2, 3, 8, 32])
def test_every_host_lands_in_exactly_one_shard(n: int) -> None:
    shards = [Shard(k, n) for k in range(1, n + 1)]
    for name in NAMES:
        assert sum(s.holds(name) for s in shards) == 1
    sizes = [sum(s.holds(name) for name in NAMES) for s in shards]
    assert sum(sizes) == len(NAMES)
    if n <= 8:  # a hash spreads them: no shard empty or holding twice its share
        assert all(0 < size < 2 * len(NAMES) / n for size in sizes), sizes


def test_shards_leave_bastions_to_their_own_run() -> None:
    hosts = [_host("jump", bastion=True)] + [_host(f"gpu{i}", chain=("jump",)) for i in range(20)]
    seen: list[str] = []
    for k in (1, 2, 3):
        mine, left = split(hosts, Shard(k, 3), lambda h: h.name, lambda h: h.is_bastion)
        assert [h.name for h in left] == ["jump"]
        seen += [h.name for h in mine]
    assert sorted(seen) == sorted(f"gpu{i}" for i in range(20))


@pytest.mark.parametrize("bad", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/2/3", ""])
def test_bad_shards_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_shard(bad)


# --- recap merge ------------------------------------------------------------------------

def _report(shard: str, hosts: dict[str, str]) -> dict[str, Any]:
    return {"command": "apply", "playbook": "bootstrap-gpu-server", "shard": shard,
            "summary": {}, "control": {"hosts": len(hosts)},
            "plan": {"summary": {"change": len(hosts)},
                     "sections": [{"name": h} for h in hosts]},
            "hosts": [{"host": h, "status": s} for h, s in hosts.items()]}


def test_merge_joins_shards_and_recounts() -> None:
    m = merge([("1.json", _report("1/2", {"gpu1": "changed", "gpu3": "ok"})),
               ("2.json", _report("2/2", {"gpu2": "unreachable"}))])
    assert [h["host"] for h in m["hosts"]] == ["gpu1", "gpu3", "gpu2"]
    assert m["summary"] == {"changed": 1, "ok": 1, "unreachable": 1}
    assert m["plan"]["summary"] == {"change": 3} and len(m["plan"]["sections"]) == 3
    assert m["failed"] == ["gpu2"]
    assert [s["shard"] for s in m["merged"]] == ["1/2", "2/2"]


def test_merge_refuses_overlaps_and_mixed_runs() -> None:
    with pytest.raises(UsageError, match="overlapping"):
        merge([("a", _report("1/2", {"gpu1": "ok"})), ("b", _report("2/2", {"gpu1": "ok"}))])
    other = {**_report("2/2", {"gpu2": "ok"}), "command": "plan"}
    with pytest.raises(UsageError, match="different runs"):
        merge([("a", _report("1/2", {"gpu1": "ok"})), ("b", other)])
    with pytest.raises(UsageError):
        merge([("a", {"nope": 1})])
    with pytest.raises(UsageError):
        merge([])


# --- roles resolved once ----------------------------------------------------------------

def test_a_role_is_merged_and_validated_once_for_all_its_hosts(tmp_path: Path) -> None:
    from provision.inventory import InventoryError, load_inventory

    good = tmp_path / "good.yml"
    good.write_text("version: 1\nroles:\n  r: {services: {jupyter: {}}, packages: [nvtop]}\n"
                    "hosts:\n" + "".join(f"  h{i}: {{address: 10.0.0.{i}, roles: [r]}}\n"
                                         for i in range(1, 5))
                    + "  own: {address: 10.0.0.9, roles: [r], services: {jupyter: {port: 9999}}}\n")
    inv = load_inventory(str(good))
    shared = [h for h in inv.hosts if h.name.startswith("h")]
    assert all(h.services is shared[0].services for h in shared)  # resolved once, shared
    own = next(h for h in inv.hosts if h.name == "own")
    assert own.services[0].port == 9999 and shared[0].services[0].port == 8888
    assert all(h.packages == ("nvtop",) for h in inv.hosts)
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\nroles:\n  r: {services: {weird: {command: /bin/true}}}\n"
                   "hosts:\n  a: {address: 10.0.0.1, roles: [r]}\n"
                   "  b: {address: 10.0.0.2, roles: [r]}\n"
                   "  c: {address: 10.0.0.3, roles: [r, nope]}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(str(bad))
    text = str(e.value)
    assert text.count("roles.r.services.weird") == 1 and f"{bad}:3:" in text
    assert "hosts.c.roles[1]: unknown role 'nope'" in text and f"{bad}:7:" in text


def test_a_finding_names_a_few_hosts_and_counts_the_rest() -> None:
    from provision.exposure import FEW, _few

    names = [f"gpu{i}/jupyter" for i in range(10_000)]
    text = _few(names, " and ")
    assert text.startswith("gpu0/jupyter and gpu1/jupyter") and text.endswith(f"and {10_000 - FEW:,} more")
    assert len(text) < 200
    assert _few(names[:3], ", ") == "gpu0/jupyter, gpu1/jupyter, gpu2/jupyter"


def test_internet_coverage_is_judged_once_per_distinct_source_list() -> None:
    from provision.exposure.internet import _covers, covers_internet

    _covers.cache_clear()
    for _ in range(1000):
        assert covers_internet(["10.0.0.0/8"]) is False
        assert covers_internet(iter(["0.0.0.0/0"])) is True
    assert _covers.cache_info().misses == 2
