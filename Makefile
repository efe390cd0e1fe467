# The one task runner: what CI runs and what the README tells a person to run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
GATEWAY_HOME_DIR ?= ./var/gateway

.PHONY: install tools browser postgres up demo test unit integration lint typecheck docs reference bench protos clean clean-data

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall whenever pyproject.toml or constraints.txt changes; the stamp records the last install.
# constraints.txt holds every package at the version the suite was tested with.
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,bench,docs]'
	touch $(STAMP)

install: $(STAMP)

## make up: run the whole suite on ./var/gateway (first run prints an admin key)
up: install
	$(VENV)/bin/gateway up --home $(GATEWAY_HOME_DIR)

## make demo: the suite on ./var/demo with two example keys and the stand-in reviewer (the README's tour)
demo: install
	mkdir -p var/demo
	test -f var/demo/config.json || install -m 600 examples/demo-config.json var/demo/config.json
	$(VENV)/bin/gateway up --home ./var/demo

# The docs' shell examples (run by tests/integration/test_docs_examples.py) are curl commands: a fresh
# machine without curl gets it from apt where it can (CI runs as root on Debian).
tools:
	@command -v curl >/dev/null || { command -v apt-get >/dev/null && apt-get update -q >/dev/null && apt-get install -y -q curl >/dev/null; } || echo "make: curl is missing and cannot be installed here: the docs' examples will be skipped"

# The web console's browser tests (tests/browser) drive Debian's Chromium through Playwright (Playwright's
# own browser download cannot work here): a fresh machine without it gets it from apt where it can.
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { command -v apt-get >/dev/null && apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } || echo "make: $(CHROMIUM) is missing and cannot be installed here: the console's browser tests will be skipped"

# The PostgreSQL vault's tests start a throwaway cluster of their own (tests/pg_support.py) with Debian's server
# binaries (initdb and pg_ctl, in /usr/lib/postgresql/<major>/bin, off PATH; pg_trgm comes with them): a fresh
# machine without them gets them from apt where it can. Those tests fail, never skip, when they are missing.
# The partition test (tests/integration/test_vault_pg_partition.py) puts the server and two hosts in network
# namespaces of their own with iproute2's ip, which it gets the same way.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { command -v apt-get >/dev/null && apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; } || echo "make: PostgreSQL's server binaries are missing and cannot be installed here: the PostgreSQL vault's tests will fail"
	@command -v ip >/dev/null || { command -v apt-get >/dev/null && apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >/dev/null; } || echo "make: ip (iproute2) is missing and cannot be installed here: the PostgreSQL partition test will fail"

## make test: the whole test suite (lint, type check, the documentation site, unit, integration, browser)
# The unit tests run on both cores (pytest-xdist); the integration tests, which start real processes on
# free ports and time their own waits, run in one process.
test: install tools browser postgres lint typecheck docs
	$(PY) -m pytest -n 2 tests/unit
	$(PY) -m pytest tests/integration

unit: install
	$(PY) -m pytest -n 2 tests/unit

integration: install postgres
	$(PY) -m pytest tests/integration

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(VENV)/bin/mypy gateway gateway_cli services gateway_http gateway_mcp

## make docs: the documentation site into build/site; a broken link or anchor, or a page left out of the nav, fails it
# mkdocs-material prints an end-of-life banner on every build (stderr only): this is its documented opt-out.
docs: export NO_MKDOCS_2_WARNING := 1
docs: install
	$(VENV)/bin/mkdocs build --strict

## make reference: regenerate docs/reference/ from the code (protos, MCP tools, config schema, CLI, metrics)
reference: install
	$(PY) -m gateway_cli.docs_reference

## make bench: every benchmark but the soak (bench/soak.py, 20+ minutes: docs/capacity.md says how to run it)
bench: install browser postgres
	$(PY) bench/rest_files.py
	$(PY) bench/footprint.py
	$(PY) bench/watcher_latency.py
	$(PY) bench/kb_archive.py
	$(PY) bench/kb_size.py
	$(PY) bench/kb_live.py
	$(PY) bench/kb_agents.py
	$(PY) bench/kb_shared.py
	$(PY) bench/vault_postgres.py
	$(PY) bench/dream_overhead.py
	$(PY) bench/dream_fidelity.py
	$(PY) bench/dream_migrate.py
	$(PY) bench/dream_staleness.py
	$(PY) bench/dream_promotion.py
	$(PY) bench/vault_reflection.py
	$(PY) bench/forget.py
	$(PY) bench/mcp_ready.py
	$(PY) bench/capacity.py --agents 100,1000
	$(PY) bench/console.py

protos: install
	$(PY) -m gateway_cli.protogen

## make clean: build and test artefacts only (the venv, caches); never ./var
clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info
	find . -path ./var -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

## make clean-data: deletes ./var, the data of make up and make demo
clean-data:
	@echo "deleting ./var: the homes of make up (var/gateway) and make demo (var/demo), with their config.json, API keys, agents' workspaces, sessions and archives"
	rm -rf var
