"""The lab of real hosts for tests: one per session, torn down at the end.

`lab` brings up a lab named `pytest-<random>` (or reuses `$PROVISION_TEST_LAB`, which it
then leaves running). Without root or systemd-nspawn & co. the lab tests are skipped with
the reason; with CI=true a missing prerequisite fails them instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.lab import plan as P
from provision.lab.netns import in_netns

_SCRIPT = Path(sys.executable).with_name("provision")
PROVISION = [str(_SCRIPT)] if _SCRIPT.exists() else [
    sys.executable, "-c", "import sys; from provision.cli import main; sys.exit(main())"]
PROGRAMS = ("systemd-nspawn", "ip", "nsenter", "ssh", "ssh-keygen", "tsig-keygen", "iptables",
            "ip6tables", "mount", "useradd")
# provision's CLI with faults injected by the tests (tests/support/faults.py), never shipped
FAULTY = [sys.executable, str(Path(__file__).parent.parent / "support" / "faults.py")]
SBIN = ("/usr/sbin/sshd", "/usr/sbin/named", "/usr/sbin/unbound", "/usr/bin/sudo")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.lab)


def missing_prerequisites() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("not root (the lab needs network namespaces, mounts, systemd-nspawn)")
    missing += [f"{p} not found (apt: see Makefile LAB_DEBS)" for p in PROGRAMS if not shutil.which(p)]
    missing += [f"{p} not found (apt: see Makefile LAB_DEBS)" for p in SBIN if not os.path.exists(p)]
    return missing


def require_lab_prerequisites() -> None:
    missing = missing_prerequisites()
    if not missing:
        return
    reason = "lab prerequisites missing: " + "; ".join(missing)
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: a missing prerequisite is a failure)", pytrace=False)
    pytest.skip(reason)


def provision(*args: str, name: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVISION_LAB_NAME": name}
    r = subprocess.run([*PROVISION, "lab", *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"provision {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


@dataclass
class Lab:
    name: str
    plan: P.LabPlan
    state: dict[str, Any]

    @property
    def dir(self) -> Path:
        return Path(self.plan.dir)

    @property
    def inventory(self) -> Path:
        return Path(self.plan.paths["inventory"])

    @property
    def ssh_config(self) -> Path:
        return Path(self.plan.paths["ssh_config"])

    @property
    def known_hosts(self) -> Path:
        return Path(self.plan.paths["known_hosts"])

    @property
    def tsig_key_file(self) -> Path:
        return Path(self.plan.paths["tsig_key"])

    def addr(self, host: str, segment: str | None = None, v6: bool = False) -> str:
        return self.plan.address(host, segment, v6)

    # --- running things ---------------------------------------------------------
    def op(self, *cmd: str, check: bool = True, timeout: float = 60,
           input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command in the operator namespace (`ip netns exec`)."""
        r = subprocess.run(["ip", "netns", "exec", self.plan.operator.netns, *cmd],
                           capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"{cmd} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def operator_netns(self) -> AbstractContextManager[None]:
        """`with lab.operator_netns():` sockets opened in the body live in the operator namespace."""
        return in_netns(self.plan.operator.netns)

    def leader(self, host: str) -> int:
        from provision.lab.state import container_leader

        pid = container_leader(self.state["pids"][host])
        assert pid, f"{host}: container not running"
        return pid

    def host(self, host: str, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a command as root inside a container (all its namespaces, via nsenter)."""
        r = subprocess.run(["nsenter", "-t", str(self.leader(host)), "-a", "--", *cmd],
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{host}: {cmd} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def provision_json(self, *args: str, env: dict[str, str] | None = None,
                       faults: tuple[str, ...] = (),
                       timeout: float = 240) -> tuple[int, dict[str, Any], str]:
        """`provision ARGS --json` in the operator namespace: (exit code, JSON or {}, stderr).
        `faults`: options of tests/support/faults.py, which then runs the CLI."""
        cli = [*FAULTY, *faults, "--"] if faults else PROVISION
        r = subprocess.run(["ip", "netns", "exec", self.plan.operator.netns, *cli, *args,
                            "--json"], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        try:
            data = json.loads(r.stdout)
        except json.JSONDecodeError:
            data = {}
        return r.returncode, data, r.stderr

    def ssh(self, host: str, *cmd: str, known_hosts: Path | None = None, check: bool = True,
            extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """Real OpenSSH from the operator namespace, host keys verified; `cmd` is quoted."""
        return self.op("ssh", "-F", str(self.ssh_config),
                       "-o", f"UserKnownHostsFile={known_hosts or self.known_hosts}",
                       "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                       "-o", "ClearAllForwardings=yes", "-o", "ConnectTimeout=5",
                       *extra, host, shlex.join(cmd), check=check)

    def tsig_keyring(self) -> Any:
        import dns.tsigkeyring

        text = self.tsig_key_file.read_text()
        name = re.search(r'key\s+"([^"]+)"', text)
        secret = re.search(r'secret\s+"([^"]+)"', text)
        assert name and secret, "unexpected TSIG key file format"
        return dns.tsigkeyring.from_text({name.group(1): ("hmac-sha256", secret.group(1))})


def one_host_inventory(lab: Lab, host: str,
                       services: dict[str, Any] | None = None) -> dict[str, Any]:
    """The lab's inventory document reduced to `host`, without roles or DNS: the host as the
    lab declares it (minus its roles), or, with `services`, only its address, the bastion
    and those services."""
    doc = yaml.safe_load(lab.inventory.read_text())
    doc.pop("dns", None)
    doc.pop("roles", None)
    doc.pop("clusters", None)  # one host trains with nobody
    entry = doc["hosts"][host]
    if services is None:
        doc["hosts"] = {host: {k: v for k, v in entry.items() if k != "roles"}}
    else:
        doc["hosts"] = {host: {"address": entry["address"], "via": "bastion", "services": services}}
    return doc


def model_api(lab: Lab) -> dict[str, Any]:
    """A plain HTTP service on port 8000 exposed to the bastion's private addresses only."""
    b4, b6 = lab.addr("bastion", "prv"), lab.addr("bastion", "prv", v6=True)
    return {"port": 8000, "bind": "0.0.0.0", "expose": {"from": [f"{b4}/32", f"{b6}/128"]},
            "command": "/usr/bin/python3 -m http.server --bind {bind} {port}"}


def _load(name: str) -> Lab:
    from provision.lab.state import read_state

    state = read_state(name)
    assert state is not None, f"lab {name} has no state"
    return Lab(name, P.plan_from_state(state), state)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    require_lab_prerequisites()
    reuse = os.environ.get("PROVISION_TEST_LAB")
    if reuse:
        r = provision("status", "--json", name=reuse, check=False)
        assert r.returncode == 0 and json.loads(r.stdout)["up"], \
            f"$PROVISION_TEST_LAB={reuse} is not up:\n{r.stdout}{r.stderr}"
        reused = _load(reuse)
        with _keys_usable_from_copies(reused):
            yield reused
        return
    name = f"pytest-{secrets.token_hex(3)}"
    try:
        provision("up", name=name)
        loaded = _load(name)
        with _keys_usable_from_copies(loaded):
            yield loaded
    finally:
        provision("down", name=name, check=False)
        shutil.rmtree(f"{P.DATA_ROOT}/{name}", ignore_errors=True)


@contextlib.contextmanager
def _keys_usable_from_copies(lab: Lab) -> Iterator[None]:
    """Tests copy the lab's inventory into their tmp_path; its TSIG key stays in the lab's
    directory, outside the copy's tree, where an inventory may not name a key file
    (docs/trust-model.md#a-providers-secret-comes-from-where-you-put-it). For the session,
    the provision config directory ($XDG_CONFIG_HOME/provision) is the lab's directory
    (by its real path, which is what counts), where the key is."""
    xdg = lab.dir / "xdg"
    xdg.mkdir(mode=0o700, exist_ok=True)
    if not (xdg / "provision").is_symlink():
        (xdg / "provision").symlink_to(lab.dir)
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(xdg)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = before



def gpu1_as_the_lab_declares(lab: Lab, d: Path) -> None:
    """Put gpu1's services and door back as the lab's inventory declares them (its roles
    aside: the modules that apply those clean them up), by `provision apply` with a state
    directory of its own under `d`: what a module that changed gpu1's door leaves, so the
    next module starts from the lab's door, the real unit, never a stand-in."""
    doc = yaml.safe_load(lab.inventory.read_text())
    doc.pop("roles", None)
    doc.pop("clusters", None)
    doc["hosts"] = {"gpu1": {k: v for k, v in doc["hosts"]["gpu1"].items() if k != "roles"}}
    path = d / "lab-gpu1.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    state = d / "lab-gpu1-state"
    state.mkdir(mode=0o700, exist_ok=True)
    code, data, err = lab.provision_json("apply", "--yes", "-i", str(path), "gpu1",
                                         env={"PROVISION_STATE_DIR": str(state)}, timeout=300)
    assert code == 0, (err, json.dumps(data)[:3000])
