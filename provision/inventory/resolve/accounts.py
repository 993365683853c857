"""Account and host names the inventory may not give: system accounts, login users, a
host selector's words; the groups a team directory may not use."""

from __future__ import annotations

from .. import model as m
from ..catalog import SERVICE_ACCOUNT_PREFIX
from .context import Section

# Debian's system accounts and other names a person must never be given.
RESERVED_ACCOUNTS = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp",
    "proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "sshd",
    "messagebus", "syslog", "bind", "unbound", "polkitd", "dnsmasq", "ntp", "postfix",
    "postgres", "mysql", "docker", "admin", "ubuntu", "debian", "ec2-user", "centos", "operator",
    "halt", "shutdown", "tss", "uuidd", "tcpdump", "landscape", "lxd", "pollinate", "usbmux",
})


# Groups that grant more than a directory (root, logs, devices, containers, sudo) or are a
# system's: never a team directory's group, which every team member is added to. The host
# refuses any other system group (gid below 1000) and any account's own group too.
PRIVILEGED_GROUPS = frozenset({
    "root", "sudo", "wheel", "adm", "admin", "staff", "shadow", "disk", "kmem", "tty", "docker",
    "lxd", "libvirt", "kvm", "systemd-journal", "systemd-network", "video", "render", "audio",
    "input", "dialout", "cdrom", "floppy", "tape", "plugdev", "netdev", "lpadmin", "sambashare",
    "ssh", "ssl-cert", "utmp", "operator", "users", "nogroup", "crontab", "mail", "www-data",
    "bluetooth", "scanner", "i2c", "gpio", "podman", "incus", "incus-admin", "_ssh",
})


class Accounts(Section):
    def reserved_team_names(self) -> None:
        """Team accounts get their keys replaced and their shell set: never a system account
        or a login user (the operator's own keys would be overwritten)."""
        logins = self.ctx.logins()
        for name in self.doc.team:
            if name in logins:
                self.fail(("team", name), f"'{name}' is a login user of this inventory; a team "
                          "member of that name would get its authorized_keys replaced (pick "
                          "another name for the person)")
            elif name in RESERVED_ACCOUNTS or name.startswith(("systemd-", "_", SERVICE_ACCOUNT_PREFIX)):
                self.fail(("team", name), f"'{name}' is a system account name; team members "
                          "need their own accounts (reserved: root, daemon, bin, sys, nobody, "
                          f"sshd, www-data, systemd-*, _*, {SERVICE_ACCOUNT_PREFIX}* (services' "
                          "own accounts) ...)")

    def selector_words(self) -> None:
        """A host selection reads `all`, `bastions` and `role:NAME` as more than a name, so a
        node or role named so would make one selection mean two things (`exec all` running
        on one host, or on every host)."""
        d = self.doc
        words = ", ".join(m.SELECTOR_WORDS)
        for section, names in (("bastions", d.bastions), ("hosts", d.hosts)):
            for name in names:
                if name.lower() in m.SELECTOR_WORDS:
                    kind = section[:-1]
                    self.fail((section, name), f"'{name}' is a host selector word: `provision "
                              f"exec {name.lower()}`, `apply {name.lower()}` and a playbook's "
                              f"`hosts: {name.lower()}` mean "
                              f"{'every host' if name.lower() == 'all' else 'every bastion'}, so "
                              f"a {kind} named so could never be selected alone (reserved: "
                              f"{words}, in any case); rename the {kind}")
        for name in d.roles:
            if name.lower() in m.SELECTOR_WORDS:
                self.fail(("roles", name), f"'{name}' is a host selector word: "
                          f"`{m.SELECTOR_PREFIX}{name}` would read as "
                          f"{'every host' if name.lower() == 'all' else 'every bastion'} "
                          f"(reserved: {words}, in any case); rename the role")
