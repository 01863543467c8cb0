# The two commands a new user runs: `make run` and `make test`. Each installs what it needs
# into .venv inside the repo first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint typecheck pytest bench clean system-tools

run: $(RUN_STAMP)
	$(BIN)/latencylens demo

test: $(TEST_STAMP) lint typecheck pytest

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

pytest: $(TEST_STAMP) system-tools
	$(BIN)/pytest

bench: $(TEST_STAMP)
	$(BIN)/python -m bench

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

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
	rm -rf $(VENV) .latencylens .pytest_cache .mypy_cache .ruff_cache
