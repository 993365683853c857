"""Which keys a login offers (pure): the one authentication policy.

Every SSH login provision makes (converge, audit, confirmations, `exec`, the paramiko
tunnel backend, the Fabric connections of `provision.fleet`) offers its keys in the order
`key_offer` gives; `provision.ssh.link` loads them and tries them in turn. The policy:

- **An identity file is named** (the host's `identity_file`, the inventory default, or a
  team member's with `--user`): that key only, as OpenSSH's `IdentitiesOnly yes` (which the
  rendered ssh_config sets) does. From the file; or, when the file is passphrase-protected,
  from the running agent (`$SSH_AUTH_SOCK`), the agent key whose public half is the file's
  `.pub`: loading it into the agent is the way to use such a key. Other agent keys are never
  offered for it (sshd's `MaxAuthTries` counts every key, and the inventory said which).
- **No identity file is named**: the agent's keys (when an agent runs), then the files
  OpenSSH would try, `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`, those that exist.

Passwords and keyboard-interactive are never tried: provision never types a secret.
The OpenSSH backend gets the same files through the rendered ssh_config (`IdentityFile`),
and OpenSSH's own agent use.
"""

from __future__ import annotations

from provision.frozen import frozen

DEFAULT_KEYS = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


@frozen
class KeyFile:
    """A private key file to offer. `named`: the inventory or `--user` named it, so a file
    that is missing or cannot be read is worth a line in the error; a default one is not."""

    path: str
    named: bool


@frozen
class AgentKeys:
    """The running ssh-agent's keys, in the agent's order: all of them, or (`only_for` a
    named identity file) the one with that file's public key, when the file itself could
    not be used."""

    only_for: str | None = None


KeySource = KeyFile | AgentKeys


def key_offer(identity_file: str | None, agent_running: bool) -> tuple[KeySource, ...]:
    """The keys to offer, in order, for a hop whose configured key is `identity_file`
    (None: none named) when an ssh-agent is (or is not) reachable."""
    if identity_file:
        agent = (AgentKeys(only_for=identity_file),) if agent_running else ()
        return (KeyFile(identity_file, named=True), *agent)
    return ((AgentKeys(),) if agent_running else ()) + tuple(
        KeyFile(p, named=False) for p in DEFAULT_KEYS)
