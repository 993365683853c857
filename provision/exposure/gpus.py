"""What the GPUs say of themselves (`audit`; pure): a driver whose kernel module and
user-space library disagree, a GPU gone from the bus, persistence mode off, uncorrected ECC
errors, an nvidia-smi that does not answer. From the `gpus` fact (`provision.facts.gpus`)."""

from __future__ import annotations

from provision.facts.gpus import Gpus, bus_key
from provision.finding import Finding
from provision.inventory.model import Host

HOLD = "hold the driver packages (`packages:` with hold) so an upgrade cannot do it again"


def gpu_findings(host: Host, fact: Gpus) -> list[Finding]:
    subject = host.name
    out: list[Finding] = []
    if not fact.present:
        if fact.pci and fact.smi == "absent":
            out.append(Finding("info", "gpu-no-driver", subject,
                               f"{len(fact.pci)} NVIDIA GPU(s) on the PCI bus and no nvidia-smi: "
                               "no driver installed", "install the driver (`packages:`)"))
        return out
    if fact.mismatch:
        versions = ""
        if fact.kernel_module and fact.library:
            versions = (f" (kernel module {fact.kernel_module}, user-space library "
                        f"{fact.library})")
        out.append(Finding("error", "gpu-driver-mismatch", subject,
                           f"NVIDIA driver/library version mismatch{versions}: every CUDA "
                           "program and nvidia-smi fail until the module matches the library",
                           f"reboot the host (or reload the nvidia modules once no process "
                           f"holds them); {HOLD}"))
    elif fact.smi == "timeout":
        out.append(Finding("error", "gpu-smi-timeout", subject,
                           "nvidia-smi did not answer in 10 s: a GPU or the driver hangs",
                           "`dmesg | grep -i xid` on the host; a reboot, or the GPU serviced"))
    for bus in fact.off_the_bus:
        said = next((g.reason for g in fact.lost if bus_key(g.bus_id) == bus), "")
        out.append(Finding("error", "gpu-off-the-bus", f"{subject}/{bus}",
                           f"the GPU at {bus} is gone from the driver"
                           + (f" (nvidia-smi: {said})" if said else " (on the PCI bus, not "
                              "listed by nvidia-smi)")
                           + ": fallen off the bus (Xid 79) or lost; nothing can use it",
                           "reboot the host; when it recurs, `dmesg | grep -i xid`, power and "
                           "cooling, reseat or replace the GPU"))
    if (not fact.mismatch and fact.smi == "failed" and not fact.devices
            and not fact.off_the_bus):
        why = fact.messages[0] if fact.messages else f"exit status {fact.status}"
        out.append(Finding("error", "gpu-smi-failed", subject, f"nvidia-smi failed: {why}",
                           "`nvidia-smi` on the host; `dmesg | grep -i nvidia`"))
    off = [d for d in fact.devices if d.persistence == "Disabled"]
    if off:
        which = ", ".join(str(d.index) for d in off)
        out.append(Finding("warning", "gpu-persistence-off", subject,
                           f"persistence mode is off on GPU {which} (of {len(fact.devices)}): "
                           "the driver tears the GPU down whenever no process holds it, so each "
                           "CUDA start waits for it, and its settings are lost",
                           "enable nvidia-persistenced (`systemctl enable --now "
                           "nvidia-persistenced`), or a `run: nvidia-smi -pm 1` step"))
    for d in fact.devices:
        if d.ecc_uncorrected:
            out.append(Finding("warning", "gpu-ecc-uncorrected", f"{subject}/gpu{d.index}",
                               f"GPU {d.index} ({d.bus_id}) has {d.ecc_uncorrected} uncorrected "
                               "ECC error(s) since the driver loaded: its results may be wrong",
                               "drain it and reboot; when they come back, "
                               "`nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT` and replace it"))
    return out
