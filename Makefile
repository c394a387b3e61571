# `make test` and `make demo` work on a fresh machine: they create .venv and install what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
# The benchmarks' own environment: their peers (the bench extra) never drift into the test environment.
BENCH_VENV  := .venv-bench
BENCH_BIN   := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed-bench

.PHONY: test test-fast js-test js-bundle demo demo-dashboard chromium lint fuzz bench soak clean

# Installs pinned to the versions the suite last passed with (.ci/constraints.txt).
$(STAMP): pyproject.toml .ci/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c .ci/constraints.txt -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): pyproject.toml .ci/constraints.txt
	test -x $(BENCH_BIN)/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install -q --upgrade pip
	$(BENCH_BIN)/python -m pip install -q -c .ci/constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# tests/unit/: tests that mirror the modules (no server, no subprocess); tests/system/: the real server,
# subprocesses, crashes, fuzzing, the browser. `make test` runs both; `make test-fast` runs the unit tests
# alone, less the long statistical ones and the PostgreSQL runs of the store suite (marked slow, postgres;
# make test runs them), in under a minute on 2 cores.
# The unit tests run on UNIT_WORKERS pytest-xdist workers, a test file per worker at a time (--dist loadfile:
# a module's fixtures are built once); they share nothing but the PostgreSQL server, where each worker has
# its own database. The system tests (real servers, timing-sensitive) run in one process.
UNIT_WORKERS ?= 2
UNIT_XDIST   := -n $(UNIT_WORKERS) --dist loadfile
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE=1 in some images):
# otherwise every run re-does pytest's assertion rewriting (~4 s of CPU per process on the unit tests) and
# every server and command a system test starts compiles the package anew (~0.2 s each, hundreds of them).
# The __pycache__ folders are gitignored.
test test-fast: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP) chromium js-test
	$(BIN)/python -m pytest $(UNIT_XDIST) tests/unit; unit=$$?; \
	$(BIN)/python -m pytest tests/system && exit $$unit

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(UNIT_XDIST) -m "not slow and not postgres" -p no:cacheprovider tests/unit

# The JavaScript device client (js/): its Node tests check it against tests/vectors/ (npm ci installs the
# locked packages). Without node the JS tests cannot run: a warning on a developer machine, a failure
# under CI=true.
js-test:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		cd js && npm ci --no-audit --no-fund --loglevel=error && node --test test/; \
	else \
		echo "node/npm are missing: the JavaScript client's tests (js/) did not run"; test "$$CI" != true; \
	fi

# The survey page's bundle (aggregator/api/static/survey.js, committed: nothing is built at run time) is rebuilt
# from js/src with esbuild; js/test/bundle.test.js fails when the committed file is stale.
js-bundle:
	cd js && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

# The dashboard's browser tests drive Debian's chromium through Playwright (never a browser Playwright
# downloads). Installed only when missing (as root, as on CI); where it cannot be installed the browser
# tests skip, except under CI=true, where they fail.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium; } || { echo "chromium is missing and could not be installed"; \
		test "$$CI" != true; }

# mypy resolves deniable.* through symlinks, since the source folders are mapped onto the package at install
# (deniable.analyst is aggregator/analyst; pyproject's mypy 'exclude' keeps it from being read twice).
lint: $(STAMP)
	$(BIN)/ruff check .
	mkdir -p $(VENV)/mypy-src/deniable
	for d in shared client aggregator; do ln -sfn ../../../$$d $(VENV)/mypy-src/deniable/$$d; done
	ln -sfn ../../../aggregator/analyst $(VENV)/mypy-src/deniable/analyst
	cd $(VENV)/mypy-src && ../bin/mypy --config-file ../../pyproject.toml -p deniable

# The demo's figure goes to $(DEMO_OUT)/deniable-demo.png (the demo prints the path).
DEMO_OUT ?= demo-output
demo: $(STAMP)
	$(BIN)/deniable demo --out $(DEMO_OUT)

# The same demo, then the aggregator stays up with its dashboard until Ctrl-C (which stops it).
demo-dashboard: $(STAMP)
	$(BIN)/deniable demo --out $(DEMO_OUT) --dashboard

# The benchmarks print figures and ratios (goals in each file's docstring); they run in $(BENCH_VENV), which
# has the bench extra (the peers), so that `make test`'s .venv stays exactly what the suite was pinned with.
bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python benchmarks/mechanisms.py
	$(BENCH_BIN)/python benchmarks/randomize.py
	$(BENCH_BIN)/python benchmarks/intervals.py
	$(BENCH_BIN)/python benchmarks/ingest.py
	$(BENCH_BIN)/python benchmarks/descriptor.py
	$(BENCH_BIN)/python benchmarks/client.py
	$(BENCH_BIN)/python benchmarks/central.py
	$(BENCH_BIN)/python benchmarks/accounting.py
	$(BENCH_BIN)/python benchmarks/slowclients.py --seconds 15
	$(BENCH_BIN)/python benchmarks/flood.py --seconds 10
	$(BENCH_BIN)/python benchmarks/amplification.py
	$(BENCH_BIN)/python benchmarks/shuffler.py
	$(BENCH_BIN)/python benchmarks/mean.py
	$(BENCH_BIN)/python benchmarks/batch.py
	$(BENCH_BIN)/python benchmarks/postgres.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# A longer fuzz run than CI's: schemathesis and hypothesis with FUZZ_EXAMPLES examples per operation (CI: 25).
FUZZ_EXAMPLES ?= 500
fuzz: $(STAMP)
	DENIABLE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -m fuzz -p no:cacheprovider -s \
		tests/system/test_fuzz_api.py tests/system/test_fuzz_bodies.py

# Steady uploads against a self-started server with retrying clients; fails if any report is lost.
SOAK_SECONDS ?= 180
SOAK_RATE ?= 200
SOAK_KILLS ?= 0
soak: $(BENCH_STAMP)
	$(BENCH_BIN)/python benchmarks/soak.py --seconds $(SOAK_SECONDS) --rate $(SOAK_RATE) --kills $(SOAK_KILLS)
