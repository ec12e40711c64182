# Quick start: `make up` (run everything) and `make test` (the full suite).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
UI_STAMP := frontend/node_modules/.installed-$(shell cat frontend/package-lock.json 2>/dev/null | cksum | cut -d' ' -f1)
CHROMIUM ?= /usr/bin/chromium
# Python caches compiled modules (and pytest its rewritten test modules) even where the environment says not to:
# without the cache every node, worker and test process the suite starts compiles the code again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install ui up test test-python test-ui lint check test-unit browser peers prometheus clean help api-types

help:
	@echo "make up    - install, build the UI, migrate, seed a demo and start node, web, worker and beat"
	@echo "make test  - install what the tests need and run the full suite (browser tests included)"
	@echo "make check - the quick loop: lint, types, import contracts and the engine's and the apps' unit tests"
	@echo "make lint  - ruff, mypy and the import contracts"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

$(UI_STAMP): frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	rm -f frontend/node_modules/.installed-* && touch $@

# The console's build, redone only when a source of it changed (make test builds it for the browser tests; 19 s).
UI_SOURCES := $(shell find frontend/src frontend/public -type f 2>/dev/null) frontend/index.html \
  frontend/vite.config.ts frontend/tsconfig.json frontend/package.json
UI_DIST := frontend/dist/index.html

$(UI_DIST): $(UI_STAMP) $(UI_SOURCES)
	cd frontend && npm run build

ui: $(UI_DIST)

up: install ui
	$(BIN)/python -m backend.launcher

# Debian's Chromium drives the browser tests (Playwright never downloads a browser).
browser:
	@test -x $(CHROMIUM) || { echo "installing chromium from Debian's packages"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# Debian's nats-server for the lifecycle bench's peers (`python -m backend.bench lifecycle --peers nats,redis`;
# the Redis peer uses the local Redis). Python clients come with `make install` (nats-py, redis).
NATS_SERVER ?= $(shell command -v nats-server 2>/dev/null || echo /usr/sbin/nats-server)
peers: install
	@test -x $(NATS_SERVER) || { echo "installing nats-server from Debian's packages"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nats-server; }

# Debian's Prometheus, promtool and Alertmanager: `promtool check metrics|rules`, `promtool test rules` on what the
# node, the web and the alert-rule export publish, and the end-to-end test where a real Prometheus scrapes a real
# node and a real Alertmanager receives the console's alerts (docs/metrics.md).
PROMTOOL ?= $(shell command -v promtool 2>/dev/null || echo /usr/bin/promtool)
ALERTMANAGER ?= $(shell command -v prometheus-alertmanager 2>/dev/null || echo /usr/bin/prometheus-alertmanager)
prometheus:
	@test -x $(PROMTOOL) -a -x $(ALERTMANAGER) || { echo "installing prometheus and alertmanager from Debian's packages"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager; }

# The frontend's API types, generated from the control plane's OpenAPI schema (a test fails when stale).
api-types: install $(UI_STAMP)
	mkdir -p var && APP_ENV=test $(BIN)/python manage.py spectacular --format openapi-json --file var/openapi.json
	cd frontend && npm run --silent api-types

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test-ui: ui
	cd frontend && npm test

# pytest runs in PYTEST_WORKERS processes (pytest-xdist; tests/support/workers.py says what each keeps to itself
# and which tests share one); PYTEST_WORKERS=0 runs it in this process. A JUnit report with every test's time goes
# to var/test-results.xml: `python -m tests.support.timing_report var/test-results.xml` (docs/testing.md).
PYTEST_WORKERS ?= 3
PYTEST_XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS))
PYTEST = APP_ENV=test $(BIN)/python -m pytest $(PYTEST_XDIST)
# pytest's exit code 5 means it collected no tests (a filter that matched nothing): not a failure.
NO_TESTS_OK = rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$rc

test-python: install ui browser peers prometheus
	@mkdir -p var; $(PYTEST) --junitxml=var/test-results.xml $(PYTEST_ARGS); $(NO_TESTS_OK)

# The unit tests of the engine and the apps: no browser, no Spark, no launched system or crash test (`slow`).
test-unit: install
	@$(PYTEST) -m "not slow and not browser and not spark" tests/storage_engine tests/backend \
	  tests/test_function_imports.py $(PYTEST_ARGS); $(NO_TESTS_OK)

check: lint test-unit

test: lint test-ui test-python

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist var
