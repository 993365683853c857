"""The model built from good inventories: roles, catalog defaults, chains, merging."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from provision.inventory import InventoryError, load_inventory
from provision.inventory.source import load_yaml_text

EXAMPLE = Path(__file__).parents[2] / "inventories" / "example.yml"


def write(tmp_path: Path, text: str, name: str = "inv.yml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_example_inventory_loads_with_roles_and_catalog_defaults() -> None:
    inv = load_inventory(EXAMPLE)
    gpu1 = inv.node("gpu1")
    names = [s.name for s in gpu1.services]
    assert names == ["jupyter", "tensorboard", "model-api"]  # role services first, then the host's
    jupyter = gpu1.service("jupyter")
    assert jupyter is not None
    assert (jupyter.port, jupyter.bind, jupyter.expose.kind) == (8888, "127.0.0.1", "tunnel")
    api = gpu1.service("model-api")
    assert api is not None and api.expose.kind == "public"
    assert api.expose.sources == ("0.0.0.0/0", "::/0")
    assert gpu1.packages == ("tmux", "htop", "nvtop")
    assert inv.chain(gpu1)[0].name == "jump"
    gpu2 = inv.node("gpu2")
    j2, tb2 = gpu2.service("jupyter"), gpu2.service("tensorboard")
    assert j2 is not None and tb2 is not None
    assert (j2.port, tb2.port, tb2.logdir) == (8889, 6007, "/srv/runs")  # host overrides role


def test_model_is_immutable() -> None:
    inv = load_inventory(EXAMPLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inv.hosts[0].address = "1.2.3.4"  # type: ignore[misc]


def test_catalog_ports() -> None:
    from provision.inventory.catalog import CATALOG

    assert {k: v.port for k, v in CATALOG.items()} == {
        "jupyter": 8888, "tensorboard": 6006, "mlflow": 5000, "gradio": 7860,
        "tf-serving-rest": 8501, "tf-serving-grpc": 8500, "fastapi": 8000,
        "prometheus": 9090, "grafana": 3000}


def test_nested_jump_chain_outermost_first(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """
version: 1
bastions:
  edge: {address: 203.0.113.1}
  inner: {address: 10.0.0.1, via: edge}
hosts:
  gpu1: {address: 10.0.1.5, via: inner}
"""))
    assert inv.node("gpu1").jump_chain == ("edge", "inner")
    assert inv.node("inner").jump_chain == ("edge",)


def test_directory_inventory_merges_files(tmp_path: Path) -> None:
    write(tmp_path, "version: 1\nhosts:\n  gpu1: {address: 10.0.0.1, ssh_from: [10.0.0.0/8]}\n", "10-a.yml")
    write(tmp_path, "version: 1\nhosts:\n  gpu2: {address: 10.0.0.2, ssh_from: [10.0.0.0/8]}\n", "20-b.yaml")
    inv = load_inventory(tmp_path)
    assert [h.name for h in inv.hosts] == ["gpu1", "gpu2"]


def test_several_errors_reported_at_once(tmp_path: Path) -> None:
    p = write(tmp_path, "version: 1\nhosts:\n  a: {address: 'x y', port: 0}\n  b: {address: 10.0.0.1, via: nope}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    fields = {pr.field for pr in e.value.problems}
    assert {"hosts.a.address", "hosts.a.port"} <= fields


def test_select_by_role_and_name() -> None:
    inv = load_inventory(EXAMPLE)
    assert [h.name for h in inv.select(["role:gpu-server"])] == ["gpu1", "gpu2"]
    assert [h.name for h in inv.select(["gpu2"])] == ["gpu2"]
    assert [h.name for h in inv.select([])] == ["gpu1", "gpu2"]
    with pytest.raises(KeyError):
        inv.select(["gpu9"])


def test_positions_point_at_keys() -> None:
    doc = load_yaml_text("version: 1\nhosts:\n  gpu1:\n    address: x\n", "f.yml")
    pos = doc.where(("hosts", "gpu1", "address"))
    assert (pos.line, pos.column) == (4, 5)
    assert doc.where(("hosts", "gpu1", "nothing", "deeper")).line == 3
