"""The inventory's secret fields as validated types (pure): a secret's name, its armored
ciphertext, an extra recipient's key, an environment variable's name and plain value, and
where a service gets a secret (an env var, or a file under $CREDENTIALS_DIRECTORY)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, StrictStr, Tag

from provision.secretdata.armor import ArmorError, read
from provision.secretdata.recipients import AGE_KEY, unusable
from provision.text import printable, unsafe

_SECRET_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CRED_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# set by systemd for the service, or changing how the service's own loader runs it
# set by systemd for the service: a value of ours would hide or fake systemd's. (LD_* are
# not refused: whoever writes the inventory is root on the host anyway, and a CUDA service
# may need LD_LIBRARY_PATH.)
RESERVED_ENV = frozenset({"CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                          "LISTEN_FDNAMES", "INVOCATION_ID", "SYSTEMD_EXEC_PID", "MAINPID"})
# what a unit's Environment= line cannot hold as written (provision.render.sinks.unit_value)
_UNIT_BREAKERS = set("%$\\\"' \t")


def check_secret_name(value: str) -> str:
    if not _SECRET_NAME.match(value):
        raise ValueError(f"{printable(value)!r} is not a secret name (a letter, then at most 63 "
                         "letters, digits, '_' or '-')")
    return value


def check_armored(value: str) -> str:
    try:
        read(value)
    except ArmorError as e:
        raise ValueError(f"not an age-encrypted value: {e}") from None
    return value


def check_recipient(value: str) -> str:
    text = " ".join(value.split())
    if unsafe(text):
        raise ValueError("a recipient key must be one line of printable text")
    why = unusable(text)
    if why is not None:
        raise ValueError(f"age cannot encrypt to this key: {why}; give an ssh-ed25519 key, an "
                         "ssh-rsa key of >= 2048 bits, or an age1... key from age-keygen")
    return text if AGE_KEY.match(text) else " ".join(text.split()[:2])


def check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{printable(value)!r} is not an environment variable name (a letter "
                         "or '_', then letters, digits or '_')")
    if value in RESERVED_ENV:
        raise ValueError(f"{value} is set by systemd for the service; pick another name")
    return value


def check_env_value(value: str) -> str:
    bad = unsafe(value) or next((c for c in value if c in _UNIT_BREAKERS), None)
    if bad is not None:
        raise ValueError(f"a plain environment value is written into the unit file, which "
                         f"cannot hold {printable(bad)!r} as written (spaces, quotes, '%', '$', "
                         "'\\' and control characters change its meaning); put such a value "
                         "in a secret (`provision secrets set`) and name it under 'secrets'")
    if len(value) > 4096:
        raise ValueError("a plain environment value is at most 4096 characters")
    return value


def check_cred_name(value: str) -> str:
    if not _CRED_NAME.match(value) or value in (".", ".."):
        raise ValueError(f"{printable(value)!r} is not a credential file name (letters, digits, "
                         "'_', '.', '-'; no '/'; at most 64)")
    return value


SecretName = Annotated[StrictStr, AfterValidator(check_secret_name)]
Armored = Annotated[StrictStr, AfterValidator(check_armored)]
RecipientKey = Annotated[StrictStr, AfterValidator(check_recipient)]
EnvVar = Annotated[StrictStr, AfterValidator(check_env_name)]
EnvValue = Annotated[StrictStr, AfterValidator(check_env_value)]
CredName = Annotated[StrictStr, AfterValidator(check_cred_name)]


class SecretFileDoc(BaseModel):
    """A secret as a file of the service's $CREDENTIALS_DIRECTORY (systemd LoadCredential=)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    file: CredName = Field(description="the file's name under $CREDENTIALS_DIRECTORY")


def _target_form(value: Any) -> str:
    # the form written is the one checked (tags capitalised: error paths drop them)
    return "File" if isinstance(value, dict) else "Env"


SecretTarget = Annotated[Annotated[EnvVar, Tag("Env")] | Annotated[SecretFileDoc, Tag("File")],
                         Discriminator(_target_form)]
