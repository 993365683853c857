"""Defaults for the services ML teams run, keyed by the service name used in inventories. Pure data."""

from __future__ import annotations

from provision.frozen import frozen


@frozen
class CatalogEntry:
    port: int
    command: str | None  # None: the inventory must give one
    scheme: str = "http"
    env: str | None = None  # the python env its {venv} is when the service names none


# Commands run under systemd; {venv} is the service's virtualenv (empty means PATH). A
# service with a default `env` that names no venv runs from that python env (installed by
# the python_envs step), so `services: {jupyter: {}}` works on a bare image.
CATALOG: dict[str, CatalogEntry] = {
    "jupyter": CatalogEntry(8888, "{venv}jupyter server --config={config}", env="jupyterlab"),
    "tensorboard": CatalogEntry(6006, "{venv}tensorboard --logdir {logdir} --host {bind} --port {port}",
                                env="tensorboard"),
    "mlflow": CatalogEntry(5000, "{venv}mlflow server --host {bind} --port {port}"),
    "gradio": CatalogEntry(7860, None),
    "tf-serving-rest": CatalogEntry(8501, None),
    "tf-serving-grpc": CatalogEntry(8500, None, scheme="grpc"),
    "fastapi": CatalogEntry(8000, "{venv}uvicorn app:app --host {bind} --port {port}"),
    "prometheus": CatalogEntry(9090, "{venv}prometheus --web.listen-address={bind}:{port}"),
    "grafana": CatalogEntry(3000, None),
}

DEFAULT_BIND = "127.0.0.1"
DEFAULT_LOGDIR = "/srv/runs"

def member_socket(template: str, member: str) -> str:
    """Where a member's own Jupyter listens: a Unix socket in a directory systemd makes for
    their server alone (RuntimeDirectory=%p/%i: /run/provision-TEMPLATE/MEMBER, 0700, theirs),
    so no other account can listen in its place, as any can on a loopback port. A fixed
    path, unlike their home: OpenSSH's `-L PORT:/path` and LocalForward need it absolute."""
    return f"/run/provision-{template}/{member}/jupyter.sock"


# Where a member's own Jupyter keeps its token, in their home (0600, made there by the
# server's config as the member; read by their tunnel over their own login).
MEMBER_TOKEN_FILE = "~/.local/share/provision/jupyter-token"
# The python envs the catalog's defaults name, when the inventory does not declare them.
DEFAULT_ENVS: dict[str, tuple[str, ...]] = {"jupyterlab": ("jupyterlab",), "tensorboard": ("tensorboard",)}

# A service runs as an account of its own (never the operator's login user, who has
# passwordless sudo): `svc-NAME`, a system account provision creates, home under
# SERVICE_HOMES (0700). docs/trust-model.md#the-people-on-the-host
SERVICE_ACCOUNT_PREFIX = "svc-"
SERVICE_HOMES = "/var/lib/provision-services"
ACCOUNT_MAX = 32  # useradd's limit on Debian


def service_account(name: str) -> str:
    """The account a service runs as when the inventory names none: `svc-` and the name in
    the characters account names allow (lower case, digits, '-')."""
    return SERVICE_ACCOUNT_PREFIX + "".join(c if c.isalnum() or c == "-" else "-"
                                            for c in name.lower())


def service_home(account: str) -> str:
    return f"{SERVICE_HOMES}/{account}"
