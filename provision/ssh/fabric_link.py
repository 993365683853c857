"""A `fabric.Connection` over the one SSH link (I/O): for the Fabric API (`provision.fleet`)
and the Python tasks of a playbook (`provision.pytasks.fabric`).

The hop is a `provision.ssh.link.Link`: it opens the connection (host keys through
`KnownHosts`, keys offered by `key_offer`, the jump chain over `ChannelSocket`s), and the
Fabric connection runs on its paramiko client (`run`, `sudo`, `put`, `get`, `sftp`,
`forward_local`...). Several Fabric connections may wrap one Link (a bastion shared by a
`ThreadingGroup`'s hosts, or a run's already open hop): they share its transport and its
thread-safe `open`. Fabric's public API only: a subclass that overrides `open` and `close`,
and sets the public `client` and `transport` attributes.

Host output is escaped on its way to the operator's terminal: the runners of these
connections (`runners.remote`, `runners.remote_shell` in the Config) write what `run`,
`sudo` and `shell` echo through `provision.text.PrintableStream`, and the tail of output a
failure's message shows (`UnexpectedExit`, `CommandTimedOut`) and `str(result)` through
`printable_lines`; `Result.stdout`/`.stderr` stay the host's raw text (data, for the caller
to use; print them through `provision.text.printable`). `raw_output=True` keeps Fabric's
own runners: a host's escape sequences reach the terminal.

This module imports Fabric (and with it invoke, ~0.15 s of start-up): only the fleet API and
a playbook with Python tasks import it.
"""

from __future__ import annotations

import threading
from typing import IO, Any, cast

from fabric import Config, Connection
from fabric.runners import Remote, RemoteShell

from provision.text import PrintableStream, printable_lines

from .link import Link


class EscapedResult:
    """Mixed into a Result: what a failure's message or `str(result)` shows of the host's
    output is escaped; `stdout` and `stderr` themselves stay raw."""

    def tail(self, stream: str, count: int = 10) -> str:
        return printable_lines(cast(Any, super()).tail(stream, count))

    def __str__(self) -> str:
        return printable_lines(cast(Any, super()).__str__())


_MIXED: dict[tuple[type, type], type] = {}
_MIXED_LOCK = threading.Lock()  # results are made in a ThreadingGroup's threads


def _mixed(mixin: type, cls: type) -> type:
    """`cls` with `mixin` first in its MRO (made once per pair)."""
    if issubclass(cls, mixin):
        return cls
    with _MIXED_LOCK:
        key = (mixin, cls)
        if key not in _MIXED:
            _MIXED[key] = type(f"Escaped{cls.__name__}", (mixin, cls), {})
        return _MIXED[key]


class EscapedOutput:
    """Mixed into a Fabric/invoke Runner: every piece of the host's output it echoes to the
    operator's streams is escaped (`PrintableStream`, one per reading thread: stdout and
    stderr are read in threads of their own), and its Result shows output escaped."""

    def _stream(self) -> PrintableStream:
        streams: dict[int, PrintableStream] = self.__dict__.setdefault("_printable", {})
        return streams.setdefault(threading.get_ident(), PrintableStream())

    def write_our_output(self, stream: IO[str], string: str) -> None:
        text = self._stream().feed(string)
        if text:
            cast(Any, super()).write_our_output(stream, text)

    def _flushed(self, handle: str, buffer_: list[str], hide: bool, output: IO[str]) -> None:
        getattr(super(), handle)(buffer_, hide, output)
        rest = self._stream().end()
        if rest and not hide:
            cast(Any, super()).write_our_output(output, rest)

    def handle_stdout(self, buffer_: list[str], hide: bool, output: IO[str]) -> None:
        self._flushed("handle_stdout", buffer_, hide, output)

    def handle_stderr(self, buffer_: list[str], hide: bool, output: IO[str]) -> None:
        self._flushed("handle_stderr", buffer_, hide, output)

    def generate_result(self, **kwargs: Any) -> Any:
        result = cast(Any, super()).generate_result(**kwargs)
        result.__class__ = _mixed(EscapedResult, type(result))
        return result


def escaping(runner: type) -> type:
    """`runner` (a Fabric/invoke Runner class, Fabric's or one of the caller's own) with its
    echo of host output escaped."""
    return _mixed(EscapedOutput, runner)


def fabric_config(raw_output: bool = False, **overrides: Any) -> Config:
    """A Fabric Config that reads no ssh_config file (the inventory says how to connect),
    whose remote runners (Fabric's, or those `runners=` names) escape host output, unless
    `raw_output`."""
    runners = {"remote": Remote, "remote_shell": RemoteShell, **overrides.pop("runners", {})}
    if not raw_output:
        for kind in ("remote", "remote_shell"):
            runners[kind] = escaping(runners[kind])
    return Config(overrides={"load_ssh_configs": False, "runners": runners, **overrides},
                  lazy=True)


def escaped_config(config: Config) -> Config:
    """`config` (the caller's own) with its runners made to escape host output: a copy, or
    `config` itself when they already do."""
    remote, shell = config.runners.remote, config.runners.remote_shell
    if issubclass(remote, EscapedOutput) and issubclass(shell, EscapedOutput):
        return config
    copy = config.clone()
    copy.runners.remote, copy.runners.remote_shell = escaping(remote), escaping(shell)
    return copy


class FabricLink(Connection):
    """A fabric.Connection whose connection is `link`'s: `open` opens the link (and its
    gateways), `close` closes it."""

    link: Link | None = None  # declared here: Fabric turns unknown attributes into config

    def __init__(self, link: Link, config: Config | None = None) -> None:
        config = config or fabric_config()
        gateway = None if link.gateway is None else FabricLink(link.gateway, config)
        super().__init__(link.host, user=link.user, port=link.port, config=config,
                         gateway=gateway if gateway is not None else False,
                         connect_timeout=max(1, int(link.settings.timeout)))
        self.link = link
        self.client = link.client
        self.transport = link.transport

    def open(self) -> None:
        assert self.link is not None
        self.link.open()
        self.transport = self.link.transport

    def close(self) -> None:
        super().close()  # its SFTP session, the agent forwarding
        assert self.link is not None
        self.link.close()


def fabric_connection(link: Link, config: Config | None = None) -> Connection:
    """`link` as a `fabric.Connection` (opened on first use, if `link` is not yet open);
    `config`: a Fabric Config for `run`/`sudo` defaults (default: `fabric_config()`)."""
    return FabricLink(link, config)
