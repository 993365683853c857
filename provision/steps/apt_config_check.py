"""Read back what apt makes of a configuration we wrote (pure): the batch runs `apt-config
dump` (every file of /etc/apt/apt.conf.d applied in apt's order) and fails, in one line
naming the files that set those keys, when the effective lines of our keys are not the
expected ones: a file read after ours, or /etc/apt/apt.conf, won."""

from __future__ import annotations

from shlex import quote

from provision.frozen import frozen

from .action import Action

EOF_MARK = "PROVISION_APTCONF_EOF"


@frozen
class CheckAptConfig(Action):
    path: str  # our file, for the message
    keys: str  # an extended regular expression matching the dumped lines of our keys
    lines: tuple[str, ...]  # what `apt-config dump` must print for them, in any order

    def describe(self) -> str:
        return f"read back {self.path} with apt-config dump ({len(self.lines)} settings)"

    def script(self) -> str:
        want = "\n".join(sorted(self.lines))
        return "\n".join([
            f"provision_got=$(apt-config dump 2>/dev/null | grep -E {quote(self.keys)} | LC_ALL=C sort)",
            f"provision_want=$(LC_ALL=C sort <<'{EOF_MARK}'", want, EOF_MARK, ")",
            'if [ "$provision_got" != "$provision_want" ]; then',
            '  printf \'%s\\n\' "$provision_got" >&2',
            "  provision_files=$(grep -l -E 'Unattended-Upgrade|APT::Periodic' /etc/apt/apt.conf "
            "/etc/apt/apt.conf.d/* 2>/dev/null | tr '\\n' ' ')",
            f"  printf '@error\\tapt-config dump does not show what {self.path} sets (another file wins: "
            "files that set these keys: %s)\\n' \"$provision_files\" >&2",
            "  exit 1",
            "fi",
        ])
