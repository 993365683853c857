"""The login banner (pure diff): the inventory's `defaults.login_banner` in /etc/issue (the
console's login prompt) and /etc/issue.net (what a network login service may show), a
legal notice by default (CIS 1.7; lynis BANN-7126 and BANN-7130). sshd's `Banner` is left
unset: it would print the notice on every `ssh host cmd` and break scripts that read
stderr. `login_banner: null` leaves both files as the host has them.
"""

from __future__ import annotations

from provision.facts import Facts, Request
from provision.frozen import frozen
from provision.inventory.model import Host, Inventory
from provision.render.env import render

from .actions import Action, WriteFile
from .files import diff_file

FILES = ("/etc/issue", "/etc/issue.net")


@frozen
class BannerStep:
    inv: Inventory
    host: Host
    name: str = "banner"

    def request(self) -> Request:
        return Request(files=FILES if self.inv.login_banner is not None else ())

    def diff(self, facts: Facts) -> list[Action]:
        text = self.inv.login_banner
        if text is None:
            return []
        content = render("issue.j2", text=text)
        return [a for path in FILES for a in diff_file(facts.file(path), WriteFile(path, content))]
