# The two commands a new user runs: `make run` and `make test`. Each installs what it needs
# into .venv inside the repo first.

# The collector and the tests need Python 3.11 or newer (some of their dependencies do; the SDK alone
# runs on 3.10): python3 when it is new enough, else the newest python3.1x on the PATH.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in python3 python3.14 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
endif
NEW_ENOUGH = [ -n "$(PYTHON)" ] && $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
TOO_OLD = echo "LatencyLens needs Python 3.11 or newer for its collector and tests ($(or $(PYTHON),python3): \
$$($(or $(PYTHON),python3) --version 2>&1)); install one, or name it: make $(or $(MAKECMDGOALS),run) PYTHON=python3.12" >&2; exit 2
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test test-unit lint typecheck pytest bench clean system-tools native

run: $(RUN_STAMP)
	$(NATIVE)
	$(BIN)/latencylens demo

test: $(TEST_STAMP) lint typecheck pytest

# The fast tests only (no chdb, no server, no subprocess, no browser): seconds, not minutes.
test-unit: $(TEST_STAMP)
	$(BIN)/pytest tests/unit -q

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

pytest: $(TEST_STAMP) system-tools openlit-venv ai-sdk-node
	$(NATIVE)
	$(BIN)/pytest

# The request-row modules compiled with mypyc (latencylens_collector/analysis/_compiled.py): rebuilt
# when their sources changed, skipped with a note where no C compiler is; the collector then runs
# the same modules in Python.
NATIVE = $(BIN)/python -c "from latencylens_collector.analysis._compiled import build; print(build())"

native: $(TEST_STAMP)
	$(NATIVE)

bench: $(TEST_STAMP)
	$(NATIVE)
	$(BIN)/python -m bench

$(VENV)/bin/python:
	@$(NEW_ENOUGH) || { $(TOO_OLD); }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

# OpenLIT requires openai<3 and pip backtracks at length over its full dependency set, so the
# convention tests (tests/integration/collector/analysis/test_conventions_semantics.py) run it in a virtualenv of its
# own: openlit without its dependencies, plus what it imports at runtime (httpx instrumentation
# included: openlit.init() turns it on, and its span tells when a stream began).
OPENLIT_VENV := .venv-openlit
OPENLIT_STAMP := $(OPENLIT_VENV)/.installed
OPENLIT_RUNTIME := "openai>=1.92,<3" "opentelemetry-sdk>=1.38" "opentelemetry-exporter-otlp-proto-http>=1.38" \
	"opentelemetry-instrumentation>=0.52b0" "opentelemetry-instrumentation-httpx>=0.52b0" \
	"opentelemetry-semantic-conventions>=0.59b0" "pydantic>=2" "requests>=2.26" schedule xmltodict

.PHONY: openlit-venv
openlit-venv: $(OPENLIT_STAMP)

$(OPENLIT_STAMP):
	@$(NEW_ENOUGH) || { $(TOO_OLD); }
	$(PYTHON) -m venv $(OPENLIT_VENV)
	$(OPENLIT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OPENLIT_VENV)/bin/python -m pip install --quiet --no-deps "openlit>=1.45,<2"
	$(OPENLIT_VENV)/bin/python -m pip install --quiet $(OPENLIT_RUNTIME)
	touch $@

# The AI SDK test (tests/e2e/test_ai_sdk.py) runs Vercel's AI SDK in Node: its packages, pinned by
# tests/e2e/ai_sdk/package-lock.json, installed with npm where Node is (else that test is skipped).
AI_SDK_DIR := tests/e2e/ai_sdk
AI_SDK_STAMP := $(AI_SDK_DIR)/node_modules/.installed

.PHONY: ai-sdk-node
ai-sdk-node: $(AI_SDK_STAMP)

$(AI_SDK_STAMP): $(AI_SDK_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(AI_SDK_DIR) --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "note: npm not found, the AI SDK test will be skipped (install Node.js to run it)"; fi

# The browser tests drive Debian's chromium (never a downloaded browser build) and the compose test
# runs `docker-compose config`: install both from apt when missing (CI runs as root on Debian).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-tools:
	@if [ ! -x /usr/bin/chromium ] || ! command -v docker-compose >/dev/null 2>&1; then \
		( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
			chromium docker-compose ) || echo "warning: could not install chromium/docker-compose;" \
			"their tests will be skipped"; \
	fi

clean:
	rm -rf $(VENV) $(OPENLIT_VENV) .latencylens .pytest_cache .mypy_cache .ruff_cache \
		collector/latencylens_collector/analysis/_native $(AI_SDK_DIR)/node_modules
