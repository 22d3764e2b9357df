# The README's two commands: `make demo` and `make test`. Each bootstraps .venv
# on first use (only Python 3.11+ is needed on the machine).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NPM_STAMP := tests/npm/node_modules/.installed

.PHONY: venv demo test test-fast lint typecheck bench clean chromium

# pip is quiet: say first what it does and for how long
$(STAMP): pyproject.toml
	@echo "installing OMA into $(VENV) (first use, or pyproject.toml changed): pip installs the"
	@echo "Temporal SDK, CLI and dev server, pydantic, the model and protocol SDKs and the test"
	@echo "tools (about 500 MB); about two minutes the first time, quiet until it is done"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Only .venv; then `source .venv/bin/activate` puts oma and temporal on PATH.
venv: $(STAMP)

demo: $(STAMP)
	mkdir -p scratch
	@if [ -n "$$ANTHROPIC_API_KEY" ]; then \
		echo "ANTHROPIC_API_KEY is set: the planner runs on Claude."; \
		$(BIN)/oma run examples/hybrid-team.json; \
	else \
		echo "ANTHROPIC_API_KEY is not set: model agents replay scripted responses."; \
		$(BIN)/oma run examples/hybrid-team-scripted.json; \
	fi

# The real ACP agent the tests drive, pinned by tests/npm/package-lock.json.
$(NPM_STAMP): tests/npm/package.json tests/npm/package-lock.json
	npm ci --prefix tests/npm --no-audit --no-fund
	touch $(NPM_STAMP)

# Debian's headless Chromium: tests/viewer/test_run_view.py opens `oma show --html`'s page in it.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the HTML viewer's tests"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# The whole suite and its wall time on TEST_WORKERS xdist workers (each with
# its own dev server, worker and model servers; the `fault` tests one after
# another in each of two lanes, a lane on one worker). TEST_WORKERS=0: in
# this one process.
TEST_WORKERS ?= 4
PYTEST_ARGS ?=
# Compiled bytecode (and pytest's rewritten test modules) kept under .venv,
# even where PYTHONDONTWRITEBYTECODE is set: the suite starts some hundred
# Python processes, each of which would otherwise compile the project anew.
test: export PYTHONDONTWRITEBYTECODE :=
test: export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
test: $(STAMP) $(NPM_STAMP) chromium
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); status=$$?; \
	echo "make test: the suite took $$(( $$(date +%s) - start )) s of wall time (-n $(TEST_WORKERS))"; \
	exit $$status

# The pure tests: no Temporal server, no `oma` process, no fault timed
# (every test marked neither e2e nor fault).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not e2e and not fault" -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy oma

bench: $(STAMP)
	$(BIN)/python bench/dag_overhead.py

clean:
	rm -rf $(VENV) .oma scratch
