"""The login banner's text (`defaults.login_banner`): a legal notice by default. Pure.

It lands in /etc/issue, which agetty reads with backslash escapes (`\\n` is the host's
name, `\\l` the tty), so a backslash in the inventory's text is refused rather than let
it mean something else on the console.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

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
