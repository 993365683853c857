"""Python tasks: a playbook's `task:` entries, imported (`load`) and called with the host's
Fabric connection (`fabric`). The API task authors write against is `provision.task`; the
step's decision (run, skip, check) is `provision.steps.python_task`, pure like every step."""
