"""The kernel baseline: the sysctl values dev-sec's os-hardening and the CIS benchmarks set on
a server (and lynis's scan profile checks, KRNL-6000), the modules they keep from loading,
and why each is there. Pure data; docs/hardening.md#the-kernel-baseline is its table.

In a container only the network namespace's settings (`net.*`, less GLOBAL_NET) are the
container's own; the rest are the one kernel's, read-only inside a systemd-nspawn container
(`provision.steps.kernel.shared`).
"""

from __future__ import annotations

from provision.frozen import frozen


@frozen
class Setting:
    key: str
    value: str
    why: str


# net.* keys that only the initial network namespace has (absent inside a container)
GLOBAL_NET = frozenset({"net.core.bpf_jit_harden", "net.core.bpf_jit_enable",
                        "net.core.bpf_jit_kallsyms", "net.core.bpf_jit_limit"})


def _both(stem: str, value: str, why: str, fams: tuple[str, ...] = ("ipv4",)) -> list[Setting]:
    return [Setting(f"net.{fam}.conf.{scope}.{stem}", value, why)
            for fam in fams for scope in ("all", "default")]


NETWORK: tuple[Setting, ...] = (
    *_both("rp_filter", "1", "drop packets whose source could not be answered on the interface "
           "they came in on (spoofed sources); set 2 (loose) on a multi-homed host with "
           "asymmetric routes"),
    *_both("accept_redirects", "0", "no ICMP redirect rewrites the routing table",
           ("ipv4", "ipv6")),
    *_both("secure_redirects", "0", "not even from the listed gateways"),
    *_both("send_redirects", "0", "a server is not a router: it tells nobody where to go"),
    *_both("accept_source_route", "0", "no packet chooses its own route through this host",
           ("ipv4", "ipv6")),
    *_both("log_martians", "1", "impossible source addresses are logged"),
    Setting("net.ipv4.conf.all.bootp_relay", "0", "no BOOTP relaying (lynis)"),
    Setting("net.ipv4.conf.all.proxy_arp", "0", "no answering ARP for other hosts (lynis)"),
    Setting("net.ipv4.tcp_syncookies", "1", "SYN floods do not fill the backlog"),
    Setting("net.ipv4.icmp_echo_ignore_broadcasts", "1", "no smurf amplification"),
    Setting("net.ipv4.icmp_ignore_bogus_error_responses", "1", "bogus ICMP errors are not "
            "logged (log flooding)"),
)

# IP forwarding: a GPU server routes nothing, unless Docker (or a CNI) forwards for its
# containers: left out where Docker is (provision.steps.kernel.docker_here).
FORWARDING: tuple[Setting, ...] = (
    Setting("net.ipv4.ip_forward", "0", "a server is not a router (left alone where Docker "
            "runs: its containers' traffic is forwarded)"),
    Setting("net.ipv6.conf.all.forwarding", "0", "as ip_forward, for IPv6"),
)

KERNEL: tuple[Setting, ...] = (
    Setting("kernel.kptr_restrict", "2", "kernel addresses hidden from everyone, root "
            "included (exploits need them)"),
    Setting("kernel.dmesg_restrict", "1", "the kernel log is root's (it holds addresses and "
            "other members' device errors)"),
    Setting("kernel.yama.ptrace_scope", "1", "a process may debug only its own descendants: a "
            "researcher's gdb/py-spy on a program they start works, attaching to another "
            "member's process does not (2 and 3 would take debuggers from researchers)"),
    Setting("fs.protected_hardlinks", "1", "no hard links to files one cannot write"),
    Setting("fs.protected_symlinks", "1", "no following another account's links in sticky "
            "directories (/tmp)"),
    Setting("fs.protected_fifos", "2", "no writing another account's FIFOs in sticky "
            "directories (Debian's 99-protect-links.conf says 1)"),
    Setting("fs.protected_regular", "2", "no writing another account's files in sticky "
            "directories"),
    Setting("fs.suid_dumpable", "0", "setuid programs never dump core"),
    Setting("kernel.core_uses_pid", "1", "core files named per process"),
    Setting("kernel.sysrq", "0", "no magic SysRq from a console keyboard (root still has "
            "/proc/sysrq-trigger); a team with a BMC serial console may set 176"),
    Setting("kernel.ctrl-alt-del", "0", "Ctrl-Alt-Del goes to systemd, not an immediate "
            "reboot without sync"),
    Setting("dev.tty.ldisc_autoload", "0", "no loading line disciplines on request of an "
            "unprivileged user (a CVE source)"),
    Setting("kernel.unprivileged_bpf_disabled", "1", "no BPF for unprivileged users; 1 holds "
            "until reboot (the kernel refuses 0 or 2 afterwards)"),
    Setting("net.core.bpf_jit_harden", "2", "BPF JIT hardened against spraying for everyone"),
    Setting("kernel.randomize_va_space", "2", "full address space randomisation"),
)

BASELINE: tuple[Setting, ...] = (*NETWORK, *KERNEL)

# Left as the distribution has them, on purpose (docs/hardening.md):
# - kernel.perf_event_paranoid (lynis: 3): 3 blocks unprivileged perf, which CPU-side
#   profilers (perf, py-spy's native mode, Nsight Systems' CPU sampling) need; NVIDIA's GPU
#   counters are gated by the driver's NVreg_RestrictProfilingToAdminUsers instead.
# - kernel.modules_disabled (lynis: 1): one-way until reboot; the NVIDIA driver, nfs and a
#   new NIC's module could no longer load.
# - net.ipv6.conf.*.accept_ra: clouds hand out IPv6 routes by router advertisement.
# - net.ipv4.tcp_timestamps: lynis takes 0 or 1; 1 helps PAWS and RTT estimates.
LEFT_ALONE = ("kernel.perf_event_paranoid", "kernel.modules_disabled")

# modules no GPU server needs, kept from loading the way lynis checks (NETW-3200 wants
# `install X /bin/true`; USB-1000 and STRG-1846 also take a blacklist line)
MODULES: tuple[tuple[str, str], ...] = (
    ("dccp", "uncommon network protocol (NETW-3200)"),
    ("sctp", "uncommon network protocol (NETW-3200)"),
    ("rds", "uncommon network protocol (NETW-3200)"),
    ("tipc", "uncommon network protocol (NETW-3200)"),
    ("usb-storage", "USB mass storage (USB-1000); a BMC's virtual media needs it"),
    ("firewire-core", "FireWire storage and DMA (STRG-1846)"),
    ("firewire-ohci", "FireWire storage and DMA (STRG-1846)"),
)
