# The two set-up commands (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# pytest-xdist workers: one per core. Each takes its own test database, Redis database and data directory.
PYTEST_WORKERS ?= auto
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test check docs install install-test browser-deps reader-env bench bench-load bench-docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## Demo: install, migrate, load the sample data, run the offline baselines, score, serve on localhost:8000.
demo: install
	$(BIN)/attune demo --host $(HOST) --port $(PORT)

## Browser tests use Debian's Chromium; install it when we can (root), otherwise they are skipped with a reason.
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser tests..."; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null) \
	      || echo "WARNING: could not install chromium; browser tests will be skipped"; \
	  else echo "NOTE: /usr/bin/chromium not found and not root: browser tests will be skipped"; fi; \
	fi

## The reader's environment for the published-dataset tests: Hugging Face datasets, pandas, mlcroissant, apart
## from Attune's (the hub's package is named datasets, like Attune's app). The tests find it at .venv-reader.
READER_VENV ?= .venv-reader
reader-env: $(READER_VENV)/.installed

$(READER_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(READER_VENV)
	$(READER_VENV)/bin/python -c "import subprocess, sys, tomllib; reqs = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['reader']; subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--quiet', *reqs])"
	touch $@

## The whole test suite (SQLite and in-process tasks unless DATABASE_URL / REDIS_URL are set).
test: install-test browser-deps reader-env
	ATTUNE_DATA_DIR=$${ATTUNE_DATA_DIR:-$(CURDIR)/data/test} $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## The quality gate: ruff lint and format, the import contracts (layers, a Django-free core), comments that
## state rules rather than cite tracker numbers, mypy.
check: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@! grep -rnIiE --include='*.py' --include='*.html' --include='*.js' --include='*.css' \
	  --exclude-dir='.venv*' --exclude-dir=data --exclude-dir=site 'issues? #?[0-9]+' . \
	  || { echo "^ a comment cites a tracker number: state the rule it implements instead"; exit 1; }
	ATTUNE_DATA_DIR=$${ATTUNE_DATA_DIR:-$(CURDIR)/data/test} $(BIN)/mypy
	$(BIN)/python -m devtools.reference_docs --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $$(mktemp -d)/site

## The documentation site: build docs/ and serve it on http://127.0.0.1:8001 (attune docs).
docs: install-test
	$(BIN)/attune docs

bench: install-test
	$(BIN)/python bench/score_speed.py
	$(BIN)/python bench/risk_screen.py --heldout
	$(BIN)/python bench/replay_throughput.py
	@echo "Postgres + Redis benchmarks (local servers by default; see their --database and --redis options):"
	-$(BIN)/python bench/replay_distributed.py
	-$(BIN)/python bench/replay_faults.py
	-$(BIN)/python bench/interactive_under_replay.py

## Every benchmark at its published sizes; their figures go to docs/benchmarks.md (bench/publish.py).
bench-docs: install-test
	$(BIN)/python bench/publish.py

## Simulated participants against the production server configuration (needs DATABASE_URL: a Postgres server).
bench-load: install-test
	$(BIN)/python bench/participant_load.py

clean:
	rm -rf $(VENV) data artifacts .pytest_cache .hypothesis
