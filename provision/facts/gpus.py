"""Fact: the host's NVIDIA GPUs (`nvidia-smi --query-gpu=…`, the kernel module's and the
NVML library's versions, the GPUs on the PCI bus). Pure parser.

nvidia-smi's output and its errors come as one stream (`gpuline` records) and are told apart
here: a row is `index, name, uuid, driver, memory MiB, persistence, uncorrected ECC, bus id`
(`--format=csv,noheader,nounits`); anything else is a message, and two messages mean
something: "Failed to initialize NVML: Driver/library version mismatch" (the user-space
library was upgraded under a loaded kernel module) and "Unable to determine the device
handle for GPU <bus id>: …" (a GPU the driver lost: "GPU is lost", fallen off the bus).
The output formats are NVIDIA's documented ones (`nvidia-smi --help-query-gpu`, its man
page); tests/facts/gpus/README.md says which fixtures quote real outputs and from where.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provision.frozen import frozen

from .spec import FactsError, FactSpec, Rec, number

TIMEOUT_STATUSES = (124, 137)  # `timeout`: the limit hit; killed after the grace period
MISMATCH = "Driver/library version mismatch"
# "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot …"
# (some drivers print no space: "for GPU0000:4F:00.0: Unknown Error")
_LOST = re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                   r"[0-9A-Fa-f]{2}\.[0-7])\s*:\s*(.*)")
_BUS = re.compile(r"(?:([0-9A-Fa-f]{4,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}")
_KMOD = re.compile(r"Kernel Module\s+([0-9]+(?:\.[0-9]+){1,3})")


def bus_key(bus_id: str) -> str | None:
    """A PCI address in one spelling: nvidia-smi's `00000000:19:00.0` and sysfs's
    `0000:19:00.0` are both `0000:19:00.0`; None when it is not one."""
    m = _BUS.fullmatch(bus_id.strip())
    if m is None:
        return None
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{m.group(2)}:{m.group(3)}.{m.group(4)}".lower()


@frozen
class Gpu:
    index: int
    name: str
    uuid: str
    driver: str
    memory_mib: int | None  # None: "[N/A]"
    persistence: str  # Enabled | Disabled | [N/A] (not supported on this GPU)
    ecc_uncorrected: int | None  # volatile (since the driver loaded); None: no ECC or N/A
    bus_id: str  # as nvidia-smi prints it

    @property
    def memory(self) -> str:
        return "?" if self.memory_mib is None else f"{self.memory_mib} MiB"


@frozen
class LostGpu:
    bus_id: str
    reason: str  # nvidia-smi's words: "GPU is lost. Reboot the system to recover this GPU"


@frozen
class Gpus:
    # absent: no nvidia-smi on the host; ok: it answered (exit 0); failed: it exited
    # non-zero; timeout: it did not answer in time. "not probed" when the fact was not asked.
    smi: str = "not probed"
    status: int | None = None
    devices: tuple[Gpu, ...] = ()
    lost: tuple[LostGpu, ...] = ()
    messages: tuple[str, ...] = ()  # nvidia-smi's lines that are not rows (errors, warnings)
    kernel_module: str | None = None  # /proc/driver/nvidia/version
    library: str | None = None  # libnvidia-ml.so.VERSION
    pci: tuple[str, ...] = ()  # NVIDIA display/3D controllers on the PCI bus (bus_key form)

    @property
    def present(self) -> bool:
        """nvidia-smi is there (whatever it answered)."""
        return self.smi not in ("absent", "not probed")

    @property
    def mismatch(self) -> bool:
        """The kernel module and the user-space library disagree: nvidia-smi says so, or
        their versions differ."""
        said = any(MISMATCH.lower() in m.lower() for m in self.messages)
        return said or (self.kernel_module is not None and self.library is not None
                        and self.kernel_module != self.library)

    @property
    def off_the_bus(self) -> tuple[str, ...]:
        """PCI addresses of GPUs the driver does not answer for: those nvidia-smi names as
        lost, and those on the bus that it does not list (only when it listed any: a host
        whose nvidia-smi fails as a whole says so by `mismatch` or `smi`)."""
        out = {k for g in self.lost if (k := bus_key(g.bus_id))}
        if self.smi == "ok" and self.devices:
            listed = {bus_key(d.bus_id) for d in self.devices}
            out |= {p for p in self.pci if p not in listed}
        return tuple(sorted(out))

    @property
    def summary(self) -> str:
        """One line for the plan and the audit: `8 × NVIDIA H100 80GB HBM3, driver 550.54.15`;
        empty on a host without nvidia-smi."""
        if not self.present:
            return ""
        if self.smi == "timeout":
            return "gpus: nvidia-smi did not answer (timed out)"
        if self.mismatch:
            return f"gpus: driver/library version mismatch{self._versions()}"
        if not self.devices and self.off_the_bus:
            return f"gpus: none answering; {len(self.off_the_bus)} off the bus"
        if not self.devices:
            why = self.messages[0] if self.messages else f"exit status {self.status}"
            return f"gpus: none listed by nvidia-smi ({why})"
        names: dict[str, int] = {}
        for d in self.devices:
            names[d.name] = names.get(d.name, 0) + 1
        kinds = ", ".join(f"{n} × {name}" for name, n in names.items())
        drivers = ", ".join(dict.fromkeys(d.driver for d in self.devices))
        lost = len(self.off_the_bus)
        return f"gpus: {kinds}, driver {drivers}" + (f"; {lost} off the bus" if lost else "")

    def _versions(self) -> str:
        parts = [f"kernel module {self.kernel_module}" if self.kernel_module else "",
                 f"library {self.library}" if self.library else ""]
        shown = ", ".join(p for p in parts if p)
        return f" ({shown})" if shown else ""


def _int_or_none(value: str) -> int | None:
    return number(value.strip())


def _row(line: str) -> Gpu | None:
    """A CSV row, or None when the line is not one. The name is whatever lies between the
    index and the six fields after it (a name with a comma stays whole)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 8:
        return None
    index = number(parts[0])
    uuid, driver, memory, persistence, ecc, bus = parts[-6:]
    name = ", ".join(parts[1:-6])
    if index is None or not name or bus_key(bus) is None or not _VERSION.fullmatch(driver):
        return None
    return Gpu(index, name, uuid, driver, _int_or_none(memory), persistence,
               _int_or_none(ecc), bus)


def _status(value: str, rec: Rec) -> tuple[str, int | None]:
    if value == "absent":
        return "absent", None
    n = number(value, 255)
    if n is None:
        raise FactsError(f"line {rec.line}: not an exit status: {value!r}")
    if n in TIMEOUT_STATUSES:
        return "timeout", n
    return ("ok" if n == 0 else "failed"), n


def parse(records: Sequence[Rec]) -> Gpus:
    smi, status = "not probed", None
    devices: list[Gpu] = []
    lost: list[LostGpu] = []
    messages: list[str] = []
    kmod = lib = None
    pci: list[str] = []
    for r in records:
        if r.kind == "gpusmi":
            smi, status = _status(r.raw, r)
        elif r.kind == "gpuline":
            row = _row(r.raw)
            if row is not None:
                devices.append(row)
                continue
            messages.append(r.raw.strip())
            m = _LOST.search(r.raw)
            if m is not None:
                lost.append(LostGpu(m.group(1), m.group(2).strip()))
        elif r.kind == "gpukmod":
            m = _KMOD.search(r.raw)
            kmod = m.group(1) if m else None
        elif r.kind == "gpulib":
            v = r.raw.removeprefix("libnvidia-ml.so.")
            lib = v if _VERSION.fullmatch(v) else None
        elif r.kind == "gpupci":
            key = bus_key(r.raw)
            if key is None:
                raise FactsError(f"line {r.line}: not a PCI address: {r.raw!r}")
            pci.append(key)
    if smi == "not probed" and (devices or messages):
        raise FactsError("nvidia-smi's lines came without its exit status (a cut-short answer)")
    return Gpus(smi, status, tuple(devices), tuple(lost), tuple(messages), kmod, lib,
                tuple(sorted(set(pci))))


SPEC = FactSpec("gpus", ("gpusmi", "gpuline", "gpukmod", "gpulib", "gpupci"), parse)
