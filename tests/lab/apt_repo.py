"""A real apt repository for the lab tests: a small package built with dpkg-deb, indexed with
dpkg-scanpackages, a Release file signed (InRelease) with a key generated here with gpg, and
served over HTTP by Python's http.server in the lab's mirror namespace (the private segment:
nothing routes from the GPU hosts to the operator).
"""

from __future__ import annotations

import contextlib
import email.utils
import gzip
import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.netns_http import serve_directory

PACKAGE = "provision-lab-hello"
SUITE = "lab"
COMPONENT = "main"


@dataclass(frozen=True)
class Key:
    fingerprint: str
    armored: str


def _gpg(home: Path, *args: str, input: str | None = None) -> str:
    r = subprocess.run(["gpg", "--homedir", str(home), "--batch", "--no-tty", *args],
                       capture_output=True, text=True, input=input, check=False, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"gpg {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def make_key(home: Path, uid: str) -> Key:
    """A fresh ed25519 signing key in its own GNUPGHOME."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    fpr = next(line.split(":")[9] for line in _gpg(home, "--with-colons", "--list-keys").splitlines()
               if line.startswith("fpr:"))
    return Key(fpr, _gpg(home, "--armor", "--export", fpr))


def stop_agent(home: Path) -> None:
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                   capture_output=True, check=False, timeout=30)


def build_package(work: Path, name: str = PACKAGE, version: str = "1.0", provides: str = "") -> Path:
    root = work / f"{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        + (f"Provides: {provides}\n" if provides else "")
        + "Maintainer: provision lab <lab@lab.test>\n"
        "Description: a package from the lab's own apt repository\n")
    data = root / "usr/share" / name
    data.mkdir(parents=True)
    (data / "hello.txt").write_text(f"hello from the lab repository, version {version}\n")
    deb = work / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)],
                   check=True, capture_output=True, timeout=60)
    return deb


def build_repo(repo: Path, debs: list[Path], home: Path, key: Key, suite: str = SUITE,
               origin: str = "provision-lab", label: str = "provision-lab") -> None:
    """pool/ + dists/SUITE/{Release,InRelease} + dists/SUITE/main/binary-amd64/Packages(.gz).
    `origin`, `label`, `suite`: what the Release file says it is (unattended-upgrades picks
    its origins by them)."""
    pool = repo / "pool" / COMPONENT
    pool.mkdir(parents=True)
    for deb in debs:
        (pool / deb.name).write_bytes(deb.read_bytes())
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"],
                              cwd=repo, capture_output=True, text=True, check=True,
                              timeout=60).stdout
    index = repo / "dists" / suite / COMPONENT / "binary-amd64"
    index.mkdir(parents=True)
    (index / "Packages").write_text(packages)
    (index / "Packages.gz").write_bytes(gzip.compress(packages.encode()))
    lines = []
    for name in ("Packages", "Packages.gz"):
        blob = (index / name).read_bytes()
        lines.append(f" {hashlib.sha256(blob).hexdigest()} {len(blob)} "
                     f"{COMPONENT}/binary-amd64/{name}")
    release = (f"Origin: {origin}\nLabel: {label}\nSuite: {suite}\nCodename: {suite}\n"
               f"Date: {email.utils.formatdate(usegmt=True)}\nArchitectures: amd64\n"
               f"Components: {COMPONENT}\nSHA256:\n" + "\n".join(lines) + "\n")
    dists = repo / "dists" / suite
    (dists / "Release").write_text(release)
    _gpg(home, "--yes", "--local-user", key.fingerprint, "--clearsign",
         "--output", str(dists / "InRelease"), str(dists / "Release"))


def serve(netns: str, address: str, root: Path, port: int = 8080,
          suite: str = SUITE) -> contextlib.AbstractContextManager[str]:
    """http.server on ADDRESS:PORT in `netns`, serving `root`; yields its base URL once a
    real GET of the repository's InRelease answers 200."""
    return serve_directory(netns, address, root, port, f"/repo/dists/{suite}/InRelease")
