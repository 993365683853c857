"""python_envs: the inventory's fields and how they merge, the requirement record diff, the
names and digests on the host. The step's decisions: tests/steps/python_envs; the record
read back: tests/facts/python_envs; on a real host: tests/lab/test_python_envs.py."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision.inventory import InventoryError, load_inventory
from provision.inventory.model import Inventory
from provision.inventory.python_envs import ENVS_ROOT, PythonEnv, index_problem
from provision.inventory.schema import json_schema
from provision.steps.python_env_script import install_args
from provision.steps.python_envs import record_diff

MIRROR = "http://10.9.2.80:8080/simple"


def load(tmp_path: Path, doc: dict[str, Any]) -> Inventory:
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump({"version": 1, **doc}, sort_keys=False))
    return load_inventory(path)


def refused(tmp_path: Path, doc: dict[str, Any]) -> str:
    with pytest.raises(InventoryError) as e:
        load(tmp_path, doc)
    return str(e.value)


def host(services: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"address": "10.0.0.1", "services": services or {}, **extra}


# --- merging -----------------------------------------------------------------------------

def test_top_level_roles_host_and_services_envs_merge_in_order(tmp_path: Path) -> None:
    inv = load(tmp_path, {
        "python_envs": {"base": {"packages": ["numpy"]}},
        "roles": {"gpu": {"python_envs": {"torch": {"packages": ["torch==2.3.*"]}},
                          "services": {"jupyter": {}}}},
        "hosts": {"gpu1": host({"tensorboard": {"venv": "tb"}}, roles=["gpu"],
                               python_envs={"tb": {"packages": ["tensorboard"], "index_url": MIRROR}}),
                  "gpu2": host()}})
    gpu1, gpu2 = inv.node("gpu1"), inv.node("gpu2")
    assert [e.name for e in gpu1.python_envs] == ["base", "torch", "tb", "jupyterlab"]
    assert [e.name for e in gpu2.python_envs] == ["base"]  # the top level is every host
    jupyter, tb = gpu1.service("jupyter"), gpu1.service("tensorboard")
    assert jupyter is not None and tb is not None
    default = PythonEnv.of("jupyterlab", ["jupyterlab"])
    assert (jupyter.env, jupyter.venv) == ("jupyterlab", default.path)
    assert tb.env == "tb" and tb.venv == f"{ENVS_ROOT}/tb-{gpu1.python_envs[2].digest}"
    assert gpu1.python_envs[2].index_url == MIRROR


def test_a_declared_env_of_a_default_name_is_what_the_catalog_service_uses(tmp_path: Path) -> None:
    inv = load(tmp_path, {
        "python_envs": {"jupyterlab": {"packages": ["jupyterlab>=4.2"], "index_url": MIRROR}},
        "hosts": {"gpu1": host({"jupyter": {}})}})
    (env,) = inv.hosts[0].python_envs
    assert env.packages == ("jupyterlab>=4.2",) and env.index_url == MIRROR
    svc = inv.hosts[0].service("jupyter")
    assert svc is not None and svc.venv == env.path


def test_a_path_venv_or_a_command_without_venv_gets_no_env(tmp_path: Path) -> None:
    inv = load(tmp_path, {"hosts": {"gpu1": host({
        "jupyter": {"venv": "/opt/jupyter"},
        "tensorboard": {"command": "/usr/bin/tensorboard --logdir {logdir} --port {port}"},
        "mlflow": {}})}})  # the catalog has no default env for mlflow: PATH, as before
    h = inv.hosts[0]
    assert h.python_envs == ()
    assert [(s.name, s.venv, s.env) for s in h.services] == [
        ("jupyter", "/opt/jupyter", None), ("tensorboard", None, None), ("mlflow", None, None)]


def test_the_same_definition_repeated_is_one_env(tmp_path: Path) -> None:
    tb = {"packages": ["tensorboard", "six"]}
    inv = load(tmp_path, {"python_envs": {"tb": tb},
                          "roles": {"gpu": {"python_envs": {"tb": {"packages": ["six", "tensorboard"]}}}},
                          "hosts": {"gpu1": host(roles=["gpu"], python_envs={"tb": tb})}})
    assert [e.name for e in inv.hosts[0].python_envs] == ["tb"]


def test_the_digest_is_the_requirement_set_not_its_spelling() -> None:
    a = PythonEnv.of("x", ["tensorboard", "jupyterlab>=4.2"])
    b = PythonEnv.of("x", ["jupyterlab>=4.2", "tensorboard"])
    assert a == b and a.digest == b.digest and a.dirname == f"x-{a.digest}"
    assert PythonEnv.of("x", ["jupyterlab>=4.3", "tensorboard"]).digest != a.digest
    assert PythonEnv.of("x", ["jupyterlab>=4.2", "tensorboard"], index_url=MIRROR).digest != a.digest
    assert PythonEnv.of("x", ["jupyterlab>=4.2", "tensorboard"], python="python3.12").digest != a.digest
    assert (a.link, a.previous_link) == (f"{ENVS_ROOT}/x", f"{ENVS_ROOT}/.previous-x")


def test_requirements_are_normalised_as_pip_reads_them(tmp_path: Path) -> None:
    inv = load(tmp_path, {"hosts": {"gpu1": host(python_envs={
        "x": {"packages": ["Jupyterlab >= 4.2", 'numpy; python_version < "3.13"']}})}})
    assert inv.hosts[0].python_envs[0].packages == ("Jupyterlab>=4.2", 'numpy; python_version < "3.13"')


def test_venv_packages_follow_the_python() -> None:
    assert PythonEnv.of("x", ["six"]).venv_package == "python3-venv"
    assert PythonEnv.of("x", ["six"], python="python3.12").venv_package == "python3.12-venv"
    assert PythonEnv.of("x", ["six"], python="/opt/py/bin/python3").venv_package is None


# --- refused at load time ----------------------------------------------------------------

def test_one_name_with_two_requirement_sets_names_both_places(tmp_path: Path) -> None:
    text = refused(tmp_path, {
        "python_envs": {"tb": {"packages": ["tensorboard"]}},
        "roles": {"gpu": {"python_envs": {"tb": {"packages": ["tensorboard==2.17.*"]}}}},
        "hosts": {"gpu1": host(roles=["gpu"])}})
    path = tmp_path / "inv.yml"
    lines = path.read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.strip() == "tb:")
    second = next(i for i, line in enumerate(lines, 1) if line.strip() == "tb:" and i > first)
    assert f"{path}:{second}:" in text and f"declared at {path}:{first} " in text, text
    assert "roles.gpu.python_envs.tb" in text and "one requirement set" in text


@pytest.mark.parametrize(("env", "says"), [
    ({"packages": ["six @ https://example.org/six.whl"]}, "names a URL"),
    ({"packages": ["-r /etc/shadow"]}, "invalid requirement"),
    ({"packages": ["--index-url=http://evil.example/simple"]}, "invalid requirement"),
    ({"packages": ["six\n--extra-index-url http://evil.example"]}, "printable text on one line"),
    ({"packages": ["six # comment"]}, "invalid requirement"),
    ({"packages": []}, "at least 1 item"),
    ({"packages": ["six", "Six>1"]}, "same package as packages[0]"),
    ({"packages": ["six"], "index_url": "http://pypi.internal.example/simple"}, "plain http:// to pypi.internal.example"),
    ({"packages": ["six"], "index_url": "http://203.0.113.9/simple"}, "plain http:// to 203.0.113.9"),
    ({"packages": ["six"], "index_url": "https://user:pw@pypi.example/simple"}, "invalid URL"),
    ({"packages": ["six"], "index_url": "ftp://pypi.example/simple"}, "invalid URL"),
    ({"packages": ["six"], "extra_index_urls": ["http://[2001:db8::1]/simple"]}, "plain http://"),
    ({"packages": ["six"], "python": "python2"}, "invalid python"),
    ({"packages": ["six"], "python": "/usr/bin/../bin/python3"}, "invalid path"),
    ({"packages": ["six"], "pip_args": ["--pre"]}, "unknown key 'pip_args'"),
])
def test_bad_envs_are_refused_with_file_line_and_field(tmp_path: Path, env: dict[str, Any], says: str) -> None:
    text = refused(tmp_path, {"hosts": {"gpu1": host(python_envs={"x": env})}})
    assert f"{tmp_path / 'inv.yml'}:" in text and "hosts.gpu1.python_envs.x" in text, text
    assert says in text, text


@pytest.mark.parametrize(("name", "says"), [
    ("a-0123456789abcdef", "how provision names an environment's directories"),
    ("../etc", "invalid name"),
    (".previous-x", "invalid name"),
])
def test_bad_env_names_are_refused(tmp_path: Path, name: str, says: str) -> None:
    assert says in refused(tmp_path, {"python_envs": {name: {"packages": ["six"]}},
                                      "hosts": {"gpu1": host()}})


def test_a_service_naming_an_unknown_env_is_refused(tmp_path: Path) -> None:
    text = refused(tmp_path, {"hosts": {"gpu1": host({"tensorboard": {"venv": "tb"}})}})
    assert "hosts.gpu1.services.tensorboard.venv: unknown python env 'tb'" in text, text


def test_a_venv_that_is_neither_a_name_nor_a_path_is_refused(tmp_path: Path) -> None:
    text = refused(tmp_path, {"hosts": {"gpu1": host({"jupyter": {"venv": "env with space"}})}})
    assert "the name of a python env" in text and "absolute path" in text, text


@pytest.mark.parametrize(("url", "ok"), [
    ("https://pypi.org/simple", True), ("https://10.0.0.5/simple", True),
    ("http://127.0.0.1:3141/root/pypi/+simple", True), ("http://localhost:8080/simple", True),
    ("http://[::1]:8080/simple", True), ("http://10.1.2.80:8080/simple", True),
    ("http://172.16.0.9/simple", True), ("http://192.168.1.2/simple", True),
    ("http://[fd12:3456:789a:2::80]/simple", True),
    ("http://172.32.0.1/simple", False), ("http://100.64.0.1/simple", False),
    ("http://169.254.169.254/simple", False), ("http://8.8.8.8/simple", False),
    ("http://mirror.lan/simple", False), ("http://10.0.0.1.nip.io/simple", False),
])
def test_plain_http_only_to_loopback_or_private_addresses(url: str, ok: bool) -> None:
    assert (index_problem(url) == "") is ok


def test_plain_http_indexes_are_named_trusted_for_pip() -> None:
    env = PythonEnv.of("x", ["six"], index_url=MIRROR, extra_index_urls=["https://pypi.org/simple"])
    assert install_args(env) == ["--index-url", MIRROR, "--extra-index-url", "https://pypi.org/simple",
                                 "--trusted-host", "10.9.2.80:8080"]
    assert "--trusted-host" not in install_args(PythonEnv.of("x", ["six"]))


# --- the requirement record diff ---------------------------------------------------------

@pytest.mark.parametrize(("old", "new", "said"), [
    (None, {"packages": ["six"]}, []),
    ({"packages": ["six"]}, {"packages": ["six"]}, []),
    ({"packages": ["tensorboard"]}, {"packages": ["tensorboard>=2", "six"]},
     ["+ six", "tensorboard -> tensorboard>=2"]),
    ({"packages": ["numpy", "six"]}, {"packages": ["six"]}, ["- numpy"]),
    ({"packages": ["Jupyter_Lab==4.1"]}, {"packages": ["jupyter-lab==4.2"]},
     ["Jupyter_Lab==4.1 -> jupyter-lab==4.2"]),  # the same package, normalised
    ({"packages": ["six"]}, {"packages": ["six"], "index_url": MIRROR},
     [f"index https://pypi.org/simple -> {MIRROR}"]),
    ({"packages": ["six"]}, {"packages": ["six"], "extra_index_urls": [MIRROR]},
     [f"extra indexes none -> {MIRROR}"]),
    ({"packages": ["six"]}, {"packages": ["six"], "python": "python3.12"},
     ["python python3 -> python3.12"]),
])
def test_the_requirement_record_diff(old: dict[str, Any] | None, new: dict[str, Any],
                                     said: list[str]) -> None:
    before = None if old is None else PythonEnv.of("x", **old)
    assert record_diff(before, PythonEnv.of("x", **new)) == said


# --- one truth in several places ---------------------------------------------------------

def test_the_probe_fragment_reads_the_root_the_model_names() -> None:
    fragment = (files("provision._templates") / "facts" / "python_envs.sh").read_text()
    assert f"r={ENVS_ROOT}\n" in fragment and ".provision-env.json" in fragment


def test_the_json_schema_describes_python_envs_and_venv() -> None:
    schema = json_schema()
    assert "python_envs" in schema["properties"]
    assert "python env" in schema["$defs"]["ServiceDoc"]["properties"]["venv"]["description"]
    assert {"python_envs"} <= set(schema["$defs"]["HostDoc"]["properties"])
    assert {"python_envs"} <= set(schema["$defs"]["RoleDoc"]["properties"])
