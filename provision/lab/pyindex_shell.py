"""The lab's package index, I/O: read the operator's venv, repack the distributions an
adopted inventory's envs need into wheels in the resolver container's `/srv`, and serve
them there with `python3 -m http.server` on its private address (a transient unit of the
container's own systemd, so it goes with the lab). Decides nothing (`pyindex.py` does)."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
import subprocess
import time
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

from provision.text import printable

from . import plan as P
from . import pyindex as X
from .netns import in_netns
from .shell import LabError, host_dir
from .state import container_leader, read_state


def site_packages(venv: str) -> Path | None:
    found = sorted(Path(venv).glob("lib/python3*/site-packages"))
    return found[0] if found else None


def venv_dists(venv: str) -> dict[str, X.Dist]:
    """The venv's installed distributions (a venv without site-packages: none)."""
    site = site_packages(venv)
    if site is None:
        return {}
    out: dict[str, X.Dist] = {}
    # only *.dist-info: an egg-info has no RECORD of a wheel to lay out again
    for info in sorted(site.glob("*.dist-info")):
        d = metadata.PathDistribution(info)
        if not (info / "RECORD").is_file() or not (info / "WHEEL").is_file():
            continue
        name = X.canonical(d.metadata["Name"] or info.name.split("-")[0])
        if name in out:
            continue
        direct = d.read_text("direct_url.json") or ""
        out[name] = X.Dist(name, d.version, tuple(d.requires or ()), info.name,
                           editable='"editable": true' in direct or '"editable":true' in direct,
                           requires_python=d.metadata["Requires-Python"] or "")
    return out


HOST_PYTHON = "/usr/bin/python3"  # the lab hosts' python3: they boot over this machine's /


def host_python() -> str:
    """The version of the Python the lab's hosts run (3.11.2)."""
    r = subprocess.run([HOST_PYTHON, "-c", "import platform; print(platform.python_version())"],
                       capture_output=True, text=True, timeout=30, check=True)
    return r.stdout.strip()


def host_platforms() -> list[str]:
    """The platform tags of this machine (its glibc, its architecture): the lab's hosts
    boot over its `/`, so theirs."""
    from packaging.tags import platform_tags

    return list(platform_tags())


def _open_wheel(path: Path) -> int:
    """A read-only descriptor of the regular file `path`, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise X.WheelError(f"{path}: a symlink or unreadable ({e.strerror}): --wheels takes "
                           "the wheels themselves") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise X.WheelError(f"{path}: not a regular file")
    return fd


def wheel_dists(directory: str) -> dict[str, X.Dist]:
    """The wheels of `directory` (`--wheels`), by canonical name, each read from its own
    METADATA. Every entry must be a regular file with a wheel's name, one per project:
    anything else is refused (X.WheelError), nothing read past it."""
    out: dict[str, X.Dist] = {}
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as e:
        raise X.WheelError(f"{directory}: {e.strerror}") from None
    for entry in entries:
        path = Path(directory) / entry.name
        if entry.is_symlink():
            raise X.WheelError(f"{path}: a symlink: --wheels takes the wheels themselves")
        try:
            X.wheel_tags(entry.name)
        except X.WheelError as e:
            raise X.WheelError(f"{directory}/{e} (--wheels DIR holds wheels only: "
                               "`pip download --only-binary=:all: --dest DIR ...`)") from None
        fd = _open_wheel(path)
        with os.fdopen(fd, "rb") as f:
            d = X.wheel_dist(str(path), _metadata(path, f))
        if d.name in out:
            raise X.WheelError(f"{path}: a second wheel of {d.name} (with "
                               f"{Path(out[d.name].wheel).name}): keep the one for the lab's hosts")
        out[d.name] = d
    return out


def _metadata(path: Path, f: io.BufferedReader) -> bytes:
    """The bytes of the wheel's one `NAME-VERSION.dist-info/METADATA`, at most
    X.METADATA_MAX of them (a compressed bomb stops there)."""
    try:
        with zipfile.ZipFile(f) as z:
            found = [i for i in z.infolist() if i.filename.count("/") == 1
                     and i.filename.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise X.WheelError(f"{path}: {len(found)} *.dist-info/METADATA in it, not one: "
                                   "not a wheel")
            if found[0].file_size > X.METADATA_MAX:
                raise X.WheelError(f"{path}: its METADATA is {found[0].file_size} bytes "
                                   f"(at most {X.METADATA_MAX}): not a wheel's")
            with z.open(found[0]) as m:
                data = m.read(X.METADATA_MAX + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as e:
        raise X.WheelError(f"{path}: not a zip archive a wheel is ({e})") from None
    if len(data) > X.METADATA_MAX:
        raise X.WheelError(f"{path}: its METADATA is over {X.METADATA_MAX} bytes: not a wheel's")
    return data


def copy_wheel(dist: X.Dist, dest: Path) -> str:
    """DEST/NAME.whl, the bytes of --wheels' `dist.wheel` as they are (no repack),
    written atomically (0644, never through a symlink); its name."""
    name = Path(dist.wheel).name
    X.wheel_tags(name)
    fd = _open_wheel(Path(dist.wheel))
    with os.fdopen(fd, "rb") as f:
        tmp = dest / f".{name}.tmp"
        tmp.unlink(missing_ok=True)  # a leftover of a run that died (unlink: not followed)
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o644)
        with os.fdopen(out, "wb") as w:
            while chunk := f.read(1 << 20):
                w.write(chunk)
            os.fchmod(w.fileno(), 0o644)
    os.replace(tmp, dest / name)
    return name


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _installed(venv_real: str, path: Path) -> bytes:
    """The bytes of one installed file of the venv: a regular file whose real path lies in
    the venv (a RECORD line or a symlink must not publish a file from elsewhere) and that
    every account may read already (the index serves it to every lab account)."""
    real = os.path.realpath(path)
    if os.path.commonpath([real, venv_real]) != venv_real:
        raise LabError(f"{printable(str(path))}: its real path {printable(real)} is outside "
                       f"the venv {printable(venv_real)}: not published")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise LabError(f"{printable(str(path))}: not a regular file: not published")
        if not st.st_mode & stat.S_IROTH:
            raise LabError(f"{printable(str(path))}: readable by its owner only "
                           f"({stat.filemode(st.st_mode)}): the lab's index would publish it to "
                           "every lab account")
        return f.read()


def repack(venv: str, dist: X.Dist, dest: Path) -> str:
    """DEST/WHEEL.whl made from the installed files of `dist` (made once); its name."""
    site = site_packages(venv)
    assert site is not None
    info = site / dist.dist_info
    wheel_meta = (info / "WHEEL").read_text()
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    try:
        name = X.wheel_filename(dist.dist_info, tags)
    except ValueError as e:
        raise LabError(f"{venv}: {e}") from None
    if (dest / name).exists():
        return name
    scripts = frozenset(ep.name for ep in metadata.PathDistribution(info).entry_points
                        if ep.group in ("console_scripts", "gui_scripts"))
    data_dir = dist.dist_info.removesuffix(".dist-info") + ".data"
    rows: list[str] = []
    venv_real = os.path.realpath(venv)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        entries = [line.rsplit(",", 2)[0] for line in (info / "RECORD").read_text().splitlines() if line]
        placed = [(e, X.arcname(e, str(site), venv, data_dir, scripts)) for e in entries]
        # the dist-info last, RECORD at its end (as a wheel has them)
        placed.sort(key=lambda pa: (pa[1] or "").startswith(dist.dist_info))
        for entry, arc in placed:
            if arc is None:
                continue
            data = _installed(venv_real, site / entry)
            if arc.startswith(f"{data_dir}/scripts/"):
                data = X.script_text(data)
            z.writestr(arc, data)
            rows.append(f"{arc},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}")
        record = f"{dist.dist_info}/RECORD"
        z.writestr(record, "\n".join([*rows, f"{record},,"]) + "\n")
    tmp = dest / f".{name}.tmp"
    tmp.unlink(missing_ok=True)  # a leftover of a run that died (unlink: not followed)
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(out, "wb") as w:
        w.write(buf.getvalue())
        os.fchmod(w.fileno(), 0o644)
    os.replace(tmp, dest / name)
    return name


def _root(plan: P.LabPlan) -> Path:
    return host_dir(plan, plan.node("resolver")) / "root" / X.ROOT.lstrip("/")


def publish(plan: P.LabPlan, served: tuple[X.Dist, ...]) -> str:
    """The wheels of `served` (a --wheels DIR's copied, the venv's repacked; and those
    published before) served from the resolver on its private address; returns the index
    URL once a GPU host's namespace gets its page."""
    root = _root(plan)
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    for d in (root, files):
        os.chmod(d, 0o755)
    for dist in served:
        if dist.wheel:
            copy_wheel(dist, files)
        else:
            repack(plan.venv, dist, files)
    wheels = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in files.glob("*.whl")}
    for rel, text in X.simple_pages(wheels).items():
        page = root / rel
        page.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(page.parent, 0o755)
        tmp = page.with_name(".index.html.tmp")
        tmp.write_text(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, page)
    address = plan.address("resolver", "prv")
    _serve(plan, address)
    url = X.index_url(address)
    _wait(plan, url)
    return url


def _serve(plan: P.LabPlan, address: str) -> None:
    state = read_state(plan.name) or {}
    leader = container_leader(int(state.get("pids", {}).get("resolver", 0)))
    if leader is None:
        raise LabError("resolver: the container is not running")
    enter = ["nsenter", "-t", str(leader), "-a", "--"]
    active = subprocess.run([*enter, "systemctl", "is-active", "--quiet", f"{X.UNIT}.service"],
                            capture_output=True, timeout=60, check=False)
    if active.returncode == 0:
        return  # serving the directory already: the new files are there
    r = subprocess.run([*enter, "systemd-run", f"--unit={X.UNIT}", "--property=DynamicUser=yes",
                        "--property=ProtectSystem=strict", "--property=PrivateTmp=yes",
                        "/usr/bin/python3", "-m", "http.server", "--bind", address,
                        "--directory", X.ROOT, str(X.PORT)],
                       capture_output=True, text=True, timeout=60, check=False)
    if r.returncode != 0:
        raise LabError(f"resolver: systemd-run of the package index exited {r.returncode}: "
                       f"{r.stderr.strip()[-500:]}")


def _wait(plan: P.LabPlan, url: str, timeout: float = 30) -> None:
    """A real GET of the index from the first GPU host's network namespace (where pip runs)."""
    deadline = time.monotonic() + timeout
    last = ""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy of ours
    with in_netns(plan.gpu_hosts[0].netns):
        while time.monotonic() < deadline:
            try:
                with opener.open(f"{url}/", timeout=3) as r:
                    if r.status == 200:
                        return
            except OSError as e:
                last = str(e)
            time.sleep(0.2)
    raise LabError(f"the lab's package index {url} does not answer from "
                   f"{plan.gpu_hosts[0].name} after {timeout:.0f} s ({last})")
