# provision: the two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAB_DEBS := systemd-container openssh-server openssh-client iptables iproute2 bind9 bind9-utils unbound dnsutils rsync iputils-ping sudo gpg gpg-agent gpgconf dpkg-dev pdns-server pdns-backend-sqlite3 python3-torch iperf3 pebble lego lynis unattended-upgrades
PYTEST_ARGS ?=

.PHONY: demo test unit integration lab-test lint bench mutants deps venv clean docs docs-cli schema

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Debian packages the lab needs; installed only when missing and only as root.
deps:
	@missing=$$(for p in $(LAB_DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "not root: lab packages missing ($$missing); lab tests will skip"; fi; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check provision tests
	$(VENV)/bin/mypy

# pure tests only (no process, no socket: tests/support/purity.py enforces it)
unit: $(STAMP)
	$(VENV)/bin/pytest -q tests/unit tests/facts tests/steps $(PYTEST_ARGS)

# real programs on this machine (sh, uv build, the CLI as a process), moto, the Cloud DNS fake
integration: $(STAMP)
	$(VENV)/bin/pytest -q tests/integration tests/cloud $(PYTEST_ARGS)

test: deps $(STAMP)
	$(VENV)/bin/ruff check provision tests
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -ra --durations=30 -n 6 --dist loadscope tests $(PYTEST_ARGS)

demo: deps $(STAMP)
	@bash scripts/demo.sh

bench: deps $(STAMP)
	bash bench/run.sh

# The manual: docs/cli.md regenerated from the click commands, then the mkdocs site in site/.
docs-cli: $(STAMP)
	$(PY) scripts/cli_reference.py

# The editor schema beside the example inventory (its yaml-language-server line names it).
schema: $(STAMP)
	$(VENV)/bin/provision schema > inventories/inventory.schema.json

docs: docs-cli
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Mutation testing of the safety-critical modules (mutmut 3, one module at a time, each with
# its own pure unit tests, at nice 19). Not part of `make test`. MODULES=word narrows it.
mutants: $(STAMP)
	nice -n 19 $(PY) scripts/mutants.py $(MODULES)

clean:
	rm -rf $(VENV) build dist *.egg-info
