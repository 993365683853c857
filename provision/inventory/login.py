"""What a login gets, as the inventory says it (pure): the banner's text
(`defaults.login_banner`, a legal notice by default) and the session umask of the team's
accounts (`defaults.umask`, 027 by default; provision.steps.login).

It lands in /etc/issue, which agetty reads with backslash escapes (`\\n` is the host's
name, `\\l` the tty), so a backslash in the inventory's text is refused rather than let
it mean something else on the console.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from provision.text import printable, unsafe

DEFAULT = ("This system is for the use of authorized users only. Activity on it is logged "
           "and monitored;\nusing it is consent to that monitoring and to the team's "
           "acceptable-use policy.")
MAX_LENGTH = 2000


def check_banner(value: str) -> str:
    lines = value.rstrip("\n").split("\n")
    bad = next((u for line in lines if (u := unsafe(line))), None)
    if bad:
        raise ValueError(f"a login banner must not contain control characters (found "
                         f"{printable(bad)!r}); lines are separated by newlines")
    if "\\" in value:
        raise ValueError("a login banner must not contain a backslash: /etc/issue gives "
                         "backslash sequences a meaning (\\n is the host's name)")
    if not value.strip():
        raise ValueError("a login banner must not be empty (null leaves the host's own)")
    if len(value) > MAX_LENGTH:
        raise ValueError(f"a login banner is at most {MAX_LENGTH} characters ({len(value)} given)")
    return value.rstrip("\n")


Banner = Annotated[str, AfterValidator(check_banner)]


UMASK_DEFAULT = "027"
ROOT_SHELL_TIMEOUT = 900  # seconds an idle root prompt stays open (CIS: at most 900)


def check_umask(value: str) -> str:
    """A session umask for the team's logins: octal, and never one that lets other accounts
    write (the last digit keeps 2)."""
    if not (3 <= len(value) <= 4 and all(c in "01234567" for c in value)):
        raise ValueError(f"a umask is 3 or 4 octal digits such as 027 or 077 (got {printable(value)!r})")
    if not int(value, 8) & 0o002:
        raise ValueError(f"umask {value} lets every account write the files a member makes; "
                         "the last digit must include 2 (e.g. 027, 022, 077)")
    if int(value, 8) > 0o777:
        raise ValueError(f"umask {value} is more than 0777")
    return f"{int(value, 8):03o}"


def _quoted(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError('write the umask in quotes, e.g. umask: "027" (YAML reads 027 as a '
                         "number, and not always as octal)")
    return value


Umask = Annotated[str, BeforeValidator(_quoted), AfterValidator(check_umask)]
