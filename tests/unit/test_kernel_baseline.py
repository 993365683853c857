"""The kernel step's pure parts beyond the step fixtures (tests/steps/kernel/): the plan's
notes, the forwarding keys and Docker, sysctl.d(5) order, keys given back, the docs table."""

from __future__ import annotations

from pathlib import Path

import yaml

from provision.facts import parse
from provision.facts.kernel import SPEC as KERNEL
from provision.inventory import load_inventory
from provision.steps.kernel import SYSCTL_FILE, KernelStep
from provision.steps.kernel_baseline import BASELINE, FORWARDING
from tests.support.probe_records import expand, file_rec, wrap

ROOT = Path(__file__).parent.parent.parent


def step(tmp_path: Path, host: dict[str, object] | None = None) -> KernelStep:
    p = tmp_path / "inv.yml"
    p.write_text(yaml.safe_dump({"version": 1, "hosts": {"gpu1": {"address": "10.0.1.21",
                                                                  **(host or {})}}}))
    inv = load_inventory(p)
    return KernelStep(inv, inv.hosts[0])


def facts(name: str, *extra: str):  # type: ignore[no-untyped-def]
    return parse(wrap(expand([{"include": name}, *extra])))


def test_a_container_leaves_the_shared_kernel_out_and_says_so_once(tmp_path: Path) -> None:
    notes = step(tmp_path).notes(facts("kernel-lab-gpu1.txt"))
    shared = [n for n in notes if "not settable in a container" in n]
    assert len(shared) == 1 and "kernel.kptr_restrict" in shared[0]
    assert "net.ipv4" not in shared[0]
    assert any(n.startswith("time: the clock is the machine's") for n in notes)


def test_keys_this_kernel_lacks_are_named(tmp_path: Path) -> None:
    notes = step(tmp_path).notes(facts("kernel-machine.txt"))
    missing = [n for n in notes if "not in this kernel" in n]
    assert missing and "kernel.yama.ptrace_scope" in missing[0] and "kernel.sysrq" in missing[0]


def _file(actions: list[object]) -> str:
    return next(a.content for a in actions if getattr(a, "path", "") == SYSCTL_FILE)  # type: ignore[attr-defined]


def test_forwarding_is_off_without_docker_and_left_alone_with_it(tmp_path: Path) -> None:
    plain = _file(step(tmp_path).diff(facts("kernel-machine.txt")))
    assert "net.ipv4.ip_forward = 0" in plain and "net.ipv6.conf.all.forwarding = 0" in plain
    docker = step(tmp_path).diff(facts("kernel-machine.txt", "docker\tyes",
                                       "kval\tnet.ipv4.ip_forward\t1"))
    assert "forward" not in _file(docker)
    assert not [a for a in docker if getattr(a, "key", "").endswith("forward")]
    # the inventory installing Docker counts too (it starts after this step)
    with_pkg = step(tmp_path, {"packages": ["docker.io"]}).diff(facts("kernel-machine.txt"))
    assert "forward" not in _file(with_pkg)


def test_the_cluster_port_range_is_never_the_baselines(tmp_path: Path) -> None:
    text = _file(step(tmp_path).diff(facts("kernel-machine.txt")))
    assert "ip_local_port_range" not in text
    assert all(s.key != "net.ipv4.ip_local_port_range" for s in (*BASELINE, *FORWARDING))


def test_sysctl_d_order_masks_and_sysctl_conf_once() -> None:
    k = facts("kernel-machine.txt",
              "kfile\t/etc/sysctl.d/99-protect-links.conf\t-",
              "kfile\t/run/sysctl.d/10-a.conf\t/run/sysctl.d/10-a.conf",
              "kconf\t/run/sysctl.d/10-a.conf\t1\tnet.ipv4.conf.*.rp_filter\t2").get(KERNEL)
    # /etc's link to /dev/null hides /usr/lib's file of that name (and sets nothing)
    assert "/usr/lib/sysctl.d/99-protect-links.conf" not in k.files
    assert k.files == ("/run/sysctl.d/10-a.conf", "/usr/lib/sysctl.d/50-pid-max.conf",
                       "/etc/sysctl.d/99-sysctl.conf")  # /etc/sysctl.conf is that file
    assert k.after(SYSCTL_FILE, "fs.protected_fifos") == ()
    assert [x.where() for x in k.after("/etc/sysctl.d/05-x.conf", "net.ipv4.conf.all.rp_filter")] \
        == ["/run/sysctl.d/10-a.conf:1"]  # a glob matches


def test_a_key_no_longer_wanted_gets_the_other_files_value_or_stays_until_boot(tmp_path: Path) -> None:
    ours = file_rec(SYSCTL_FILE, "fs.protected_fifos = 2\nkernel.sysrq = 0\n")
    recs = ("kfile\t" + SYSCTL_FILE + "\t" + SYSCTL_FILE,
            f"kconf\t{SYSCTL_FILE}\t1\tfs.protected_fifos\t2",
            f"kconf\t{SYSCTL_FILE}\t2\tkernel.sysrq\t0",
            "kval\tfs.protected_fifos\t2", "kval\tkernel.sysrq\t0", ours)
    s = step(tmp_path, {"sysctl": {"fs.protected_fifos": None, "kernel.sysrq": None}})
    f = facts("kernel-machine.txt", *recs)
    back = [a for a in s.diff(f) if getattr(a, "key", "") == "fs.protected_fifos"]
    assert len(back) == 1 and back[0].value == "1"  # type: ignore[attr-defined]
    assert "99-protect-links.conf:7" in back[0].why  # type: ignore[attr-defined]
    assert any("kernel.sysrq is no longer set by provision; the kernel keeps 0 until the next "
               "boot" in n for n in s.notes(f))


def test_every_baseline_key_is_in_the_docs_table() -> None:
    doc = (ROOT / "docs" / "hardening.md").read_text()
    missing = [s.key for s in (*BASELINE, *FORWARDING) if f"`{s.key}`" not in doc]
    assert not missing, f"docs/hardening.md lacks {missing}"
