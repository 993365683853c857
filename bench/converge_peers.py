"""Write equivalent pyinfra and Ansible projects for the converge benchmark.

Same work as `provision apply --playbook bootstrap-gpu-server`: team users with home and
shell, .ssh 0700, the exact authorized_keys provision writes, the sudoers drop-in, the
service units and Jupyter config that `provision render` produced, the data directory,
daemon-reload only when a unit changed, enable + start. Usage: converge_peers.py INVENTORY RENDER_DIR OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from provision.inventory import load_inventory
from provision.render import host_directories, render_host
from provision.render.env import render as render_template
from provision.steps.users import authorized_keys, sudoers_path


def main(inventory: str, out: str) -> None:
    inv = load_inventory(inventory)
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    spec: dict[str, object] = {"users": [], "hosts": {}}
    for p in inv.team:
        spec["users"].append({  # type: ignore[attr-defined]
            "name": p.name, "shell": p.shell, "home": f"/home/{p.name}",
            "authorized_keys": authorized_keys(p.name, p.keys),
            "sudoers": render_template("sudoers.j2", user=p.name) if p.sudo else None,
            "sudoers_path": sudoers_path(p.name)})
    for h in inv.hosts:
        units = {s.unit_name for s in h.services}
        files = [{"path": a.path, "content": a.content, "mode": f"{a.mode:o}", "unit": a.kind == "unit"}
                 for a in render_host(inv, h) if a.kind in ("unit", "jupyter-config") and a.service in units]
        spec["hosts"][h.name] = {  # type: ignore[index]
            "address": h.address, "files": files, "units": sorted(units),
            "dirs": [{"path": d, "owner": u} for d, u in host_directories(h)]}
    (o / "spec.json").write_text(json.dumps(spec, indent=1))
    # provision runs exactly these steps (bootstrap-gpu-server also hardens sshd and the
    # firewall, which the peers' projects do not do)
    (o / "playbook.yml").write_text("name: bench-bootstrap\nhosts: all\n"
                                    "steps: [users, packages, services]\n")
    key = inv.identity_file
    ssh_config = str(Path(inventory).with_name("ssh_config"))
    # pyinfra looks jump hosts up as "[addr]:22": give it the same keys under that name too
    kh_lines = []
    for line in Path(inv.known_hosts or "").read_text().splitlines():
        names, rest = line.split(" ", 1)
        kh_lines += [line, ",".join(f"[{n}]:22" for n in names.split(",")) + " " + rest]
    (o / "known_hosts").write_text("\n".join(kh_lines) + "\n")
    cfg = Path(ssh_config).read_text().replace(f"UserKnownHostsFile {inv.known_hosts}",
                                               f"UserKnownHostsFile {o / 'known_hosts'}")
    (o / "ssh_config.pyinfra").write_text(cfg)
    # pyinfra: paramiko with ProxyJump from the lab's ssh_config, known_hosts enforced
    hosts = [(h.name, {"ssh_hostname": h.name, "ssh_user": h.user, "ssh_key": key,
                       "ssh_config_file": str(o / "ssh_config.pyinfra"), "ssh_known_hosts_file": str(o / "known_hosts"),
                       "ssh_strict_host_key_checking": "yes"}) for h in inv.hosts]
    (o / "inventory.py").write_text(f"hosts = {hosts!r}\n")
    (o / "deploy.py").write_text(f'''
import io, json
from pyinfra import host
from pyinfra.operations import files, server, systemd
from pyinfra.operations.util import any_changed
spec = json.load(open({str(o / "spec.json")!r}))
for u in spec["users"]:
    server.user(name="user " + u["name"], user=u["name"], home=u["home"], shell=u["shell"],
                create_home=True, _sudo=True)
    files.directory(name="ssh dir", path=u["home"] + "/.ssh", user=u["name"], group=u["name"], mode="700", _sudo=True)
    files.put(name="keys", src=io.StringIO(u["authorized_keys"]), dest=u["home"] + "/.ssh/authorized_keys",
              user=u["name"], group=u["name"], mode="600", _sudo=True)
    if u["sudoers"]:
        files.put(name="sudoers", src=io.StringIO(u["sudoers"]), dest=u["sudoers_path"], user="root",
                  group="root", mode="440", _sudo=True)
me = spec["hosts"][host.name]
units = []
for f in me["files"]:
    r = files.put(name=f["path"], src=io.StringIO(f["content"]), dest=f["path"], user="root", group="root",
                  mode=f["mode"], _sudo=True)
    if f["unit"]:
        units.append(r)
for d in me["dirs"]:
    files.directory(name=d["path"], path=d["path"], user=d["owner"], group=d["owner"], mode="755", _sudo=True)
systemd.daemon_reload(_sudo=True, _if=any_changed(*units))
for unit in me["units"]:
    systemd.service(name=unit, service=unit, running=True, enabled=True, _sudo=True)
''')
    # Ansible: OpenSSH with the lab's ssh_config (ProxyJump), pipelining, no fact gathering
    lines = ["[gpu]"] + [f"{h.name}" for h in inv.hosts] + [
        "[gpu:vars]", f"ansible_user={inv.hosts[0].user}",
        f"ansible_ssh_common_args='-F {ssh_config} -o ClearAllForwardings=yes'", f"ansible_ssh_private_key_file={key}",
        "ansible_python_interpreter=/usr/bin/python3"]
    (o / "hosts.ini").write_text("\n".join(lines) + "\n")
    (o / "ansible.cfg").write_text("[defaults]\nhost_key_checking = True\nforks = 20\n"
                                   "interpreter_python = /usr/bin/python3\n"
                                   "[ssh_connection]\npipelining = True\n")
    (o / "site.yml").write_text(f'''
- hosts: gpu
  gather_facts: false
  become: true
  vars:
    spec: "{{{{ lookup('file', '{o / "spec.json"}') | from_json }}}}"
    me: "{{{{ spec.hosts[inventory_hostname] }}}}"
  tasks:
    - user: {{name: "{{{{ item.name }}}}", home: "{{{{ item.home }}}}", shell: "{{{{ item.shell }}}}", create_home: true}}
      loop: "{{{{ spec.users }}}}"
    - file: {{path: "{{{{ item.home }}}}/.ssh", state: directory, owner: "{{{{ item.name }}}}", group: "{{{{ item.name }}}}", mode: "0700"}}
      loop: "{{{{ spec.users }}}}"
    - copy: {{content: "{{{{ item.authorized_keys }}}}", dest: "{{{{ item.home }}}}/.ssh/authorized_keys", owner: "{{{{ item.name }}}}", group: "{{{{ item.name }}}}", mode: "0600"}}
      loop: "{{{{ spec.users }}}}"
    - copy: {{content: "{{{{ item.sudoers }}}}", dest: "{{{{ item.sudoers_path }}}}", owner: root, group: root, mode: "0440", validate: "visudo -cf %s"}}
      loop: "{{{{ spec.users | selectattr('sudoers') | list }}}}"
    - file: {{path: "{{{{ item.path | dirname }}}}", state: directory, owner: root, group: root, mode: "0755"}}
      loop: "{{{{ me.files }}}}"
    - copy: {{content: "{{{{ item.content }}}}", dest: "{{{{ item.path }}}}", owner: root, group: root, mode: "0{{{{ item.mode }}}}"}}
      loop: "{{{{ me.files }}}}"
      register: written
    - file: {{path: "{{{{ item.path }}}}", state: directory, owner: "{{{{ item.owner }}}}", mode: "0755"}}
      loop: "{{{{ me.dirs }}}}"
    - systemd: {{daemon_reload: true}}
      when: written.changed
    - systemd: {{name: "{{{{ item }}}}", state: started, enabled: true}}
      loop: "{{{{ me.units }}}}"
''')


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
