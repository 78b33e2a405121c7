PYTHON ?= python3
VENV = .venv
STAMP = $(VENV)/.installed
# The native data plane (native/, Rust) is built by cargo; rustup puts it in ~/.cargo/bin.
export PATH := $(HOME)/.cargo/bin:$(PATH)
export CARGO_BUILD_JOBS ?= 2
# Python caches compiled modules (and pytest its rewritten test modules) in __pycache__
# (git ignores them). An environment that turns the cache off makes every test worker and
# every process a test starts compile the project again: 12 s of CPU to collect the suite
# instead of 5, and 0.25 s more to start each console or engine process.
unexport PYTHONDONTWRITEBYTECODE
NATIVE_SOURCES = native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs native/src/*/*.rs)
# Cargo is not handed make's jobserver (make test's -j3 keeps its pipe from recipes, and
# cargo warned of it). The lint and the crate's tests build apart from the install's
# release build (make test runs them side by side).
# In a fresh clone (no target/check yet: CI) they build without incremental data, which
# only a later build of the same directory reads.
CARGO = cd native && MAKEFLAGS= cargo
CHECK_INCREMENTAL := $(if $(wildcard native/target/check),,CARGO_INCREMENTAL=0)
CARGO_CHECK = cd native && MAKEFLAGS= CARGO_TARGET_DIR=target/check $(CHECK_INCREMENTAL) cargo

.DEFAULT_GOAL := help
.PHONY: help install cargo browser promtool redis test-tools test-ready test test-first test-shared test-postgres soak test-native lint lint-native format run bench bench-engine bench-console bench-spark bench-million bench-streams bench-tail bench-filter clean distclean

help:
	@echo "make run        install everything and start the console on http://127.0.0.1:8000/"
	@echo "make test       install everything and run the whole test suite (and the crate's cargo test)"
	@echo "make soak       the multi-process power-loss sweeps, SOAK_RUNS runs of each (default 200, ~17 min), the crash loops,"
	@echo "                power-loss images and stress run at full length, and the filter and API fuzz at FUZZ_SCALE x its examples"
	@echo "make lint       ruff check + ruff format --check, cargo fmt --check + cargo clippy -D warnings"
	@echo "make format     apply ruff fixes and formatting"
	@echo "make bench      Tidemark beside its peers (SQLite, Redis Streams, JetStream, file queues)"
	@echo "                and the machine's limits in one run (docs/PERFORMANCE.md; ~4 min when quiet, plus ~10 min for the monitoring section at scale)"
	@echo "make bench-engine  the store engine benchmark alone (bench/engine.py)"
	@echo "make bench-console  time the console's pages at 1,000 topics and 10,000 queues"
	@echo "make bench-spark  Spark's scan (local[1], local[2]) beside the engine's own scan"
	@echo "make bench-million  a million queues, 20 million messages (bench/million.py)"
	@echo "make bench-streams  a million event streams beside SQLite (bench/streams.py)"
	@echo "make bench-tail  the live tail's latency from append at 1,000 msgs/s (bench/tail.py)"
	@echo "make bench-filter  filter expressions over 1,000,000 messages beside a Python loop (bench/filter.py)"
	@echo "make clean      remove caches and build output (keeps .venv and var/)"
	@echo "make distclean  clean, and also remove .venv and var/ (database and store)"

# Create the virtualenv if needed and install the project with its dev tools; the install
# builds the native crate (setuptools-rust), again whenever its sources change.
$(STAMP): pyproject.toml $(NATIVE_SOURCES) | cargo
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --upgrade pip
	MAKEFLAGS= $(VENV)/bin/pip install -e '.[dev,bench,spark,postgres]'
	touch $@

install: $(STAMP)

cargo:
	@command -v cargo >/dev/null 2>&1 || { \
		echo "cargo is missing: install Rust with rustup (https://rustup.rs), then run make again"; \
		exit 1; }

# Debian packages, named by the command each gives, installed in one apt-get when any is
# missing: $(call debian,command:package ...).
define debian
	@missing=; for tool in $(1); do \
		command -v $${tool%%:*} >/dev/null 2>&1 || missing="$$missing $${tool#*:}"; done; \
	test -z "$$missing" || { echo "installing Debian's$$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }
endef

# Browser tests drive Debian's chromium through Playwright.
browser:
	$(call debian,chromium:chromium)

# The deploy files' Prometheus rules are checked and unit-tested with promtool (Debian's
# prometheus package).
promtool:
	$(call debian,promtool:prometheus)

# Celery's broker: `make run` uses the Redis at REDIS_URL, or starts a private redis-server
# when none answers.
redis:
	$(call debian,redis-server:redis-server)

# The Debian tools the suite uses: the three above, in one apt-get.
test-tools:
	$(call debian,chromium:chromium promtool:prometheus redis-server:redis-server)

# What the Python suite needs, made side by side: the install (pip's downloads and builds,
# the crate's release build) and Debian's tools (apt).
test-ready:
	$(MAKE) --no-print-directory -j2 $(STAMP) test-tools

# pytest exits non-zero on any failure, and with 5 when no test ran. The engine suite
# runs a second time with every topic shared (all queues' entries in shared block files),
# leaving out the long loops and scale runs marked one_layout (their subject is elsewhere).
# The Celery tests use the Redis at TIDEMARK_TEST_REDIS_URL (127.0.0.1:6379/15), or a
# private redis-server the session starts when none answers (tests/conftest.py).
# Four workers (pytest-xdist) on two cores, each test file whole on one of them: most tests
# wait on a disk flush, a worker process, a JVM or a browser (two workers kept the cores
# about half busy), and module fixtures start once.
PYTEST_WORKERS ?= 4
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadfile
# The tests whose subject is the database run once more on PostgreSQL (TEST_DATABASE_URL;
# Django's runner makes test_<name> and drops it): raw SQL and bulk writes under unique
# constraints (monitoring), the alert delivery bookkeeping (one transaction per send, its
# ordering found a PostgreSQL-only bug), case-insensitive names, role rules, login delays,
# tokens, audit rows, JSON columns (resets, dead letters). Every other console test reads
# and writes through the same ORM calls and runs on SQLite only.
TEST_DATABASE_URL ?= postgres://root@127.0.0.1:5432/tidemark
PG_TESTS = $(addprefix tests/monitoring/,test_downsample.py test_sampler.py test_topic_sizes.py \
		test_big_topics.py test_big_topic_dead_queue.py test_current.py test_prometheus.py) \
	$(addprefix tests/alerts/,test_delivery.py test_delivery_order.py test_idempotence.py \
		test_task.py test_watchdog.py test_flap_damping.py test_for_duration.py test_email_flow.py) \
	$(addprefix tests/security/,test_login_usernames.py test_login_delay.py \
		test_login_lockouts.py test_password_change_throttle.py test_token_lifetime.py) \
	$(addprefix tests/console/pages/,test_users_page.py test_roles.py test_scoped_roles.py \
		test_token_states.py test_account_totp.py test_audit.py test_audited_reads.py \
		test_dlq_messages.py test_group_delete.py test_reset_undo_pages.py) \
	tests/api/test_group_delete_dlq.py tests/api/test_commit_audit_api.py
# The suite runs in two steps of two parts side by side, each pair filling the other's
# waits (on the disk, PostgreSQL, JVMs, browsers) with its own work: the first pass beside
# the crate's lint and tests (cargo, in a target directory of their own: sharing the
# install's, they would wait for its lock), then the shared-layout pass beside the
# PostgreSQL one. make stops at the first step that fails, and exits non-zero.
test: test-ready
	$(MAKE) --no-print-directory -j2 test-first test-native
	$(MAKE) --no-print-directory -j2 test-shared test-postgres

test-first: $(STAMP)
	$(VENV)/bin/python -m pytest $(PYTEST_PARALLEL)

test-shared: $(STAMP)
	TIDEMARK_TEST_LAYOUT=shared $(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) -m "not one_layout" tests/engine

test-postgres: $(STAMP)
	DATABASE_URL=$(TEST_DATABASE_URL) $(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) -m "not own_database" $(PG_TESTS)

# The random sweeps of several processes and power losses (tests/faults/
# test_durability_sweeps.py: restart after a SIGKILLed writer, a process joining a writer;
# sync and async; both topic layouts), SOAK_RUNS runs of each instead of the suite's few.
SOAK_RUNS ?= 200
# The filter language's property tests (Python's and the crate's), FUZZ_SCALE times the
# examples make test draws.
FUZZ_SCALE ?= 10
FUZZ_TESTS = tests/engine/test_filter_pre_pass.py tests/engine/test_filter_fuzz.py tests/api/test_schema_fuzz.py
# The long fault loops at their full count (TIDEMARK_SOAK, tests/faults/soak.py): SIGKILL
# rounds, every power-loss image in every variant, the stress run's full length.
SOAK_TESTS = tests/faults/test_crash_loop.py tests/faults/test_power_loss.py \
	tests/faults/test_event_index.py tests/faults/test_stress.py
soak: $(STAMP)
	TIDEMARK_SOAK_RUNS=$(SOAK_RUNS) $(VENV)/bin/python -m pytest -s -q tests/faults/test_durability_sweeps.py
	TIDEMARK_SOAK=1 $(VENV)/bin/python -m pytest -q $(PYTEST_PARALLEL) $(SOAK_TESTS)
	TIDEMARK_FUZZ_SCALE=$(FUZZ_SCALE) $(VENV)/bin/python -m pytest -q $(FUZZ_TESTS)
	export TIDEMARK_FUZZ_SCALE=$(FUZZ_SCALE); $(CARGO_CHECK) test --quiet filter::

# The crate's own tests (the byte-level core, without Python), clippy and rustfmt.
test-native: lint-native
	$(CARGO_CHECK) test --quiet

lint-native: cargo
	$(CARGO) fmt --check
	$(CARGO_CHECK) clippy --quiet --all-targets --features python -- -D warnings

lint: $(STAMP) lint-native
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(CARGO) fmt

run: $(STAMP) redis
	PY=$(VENV)/bin/python ./scripts/run.sh

# Tidemark, its peers and the machine's limits in one run; BENCH_ARGS=--quick for a smoke run.
# Redis Streams runs on a private redis-server; JetStream on the NATS server at 127.0.0.1:4222.
bench: $(STAMP) redis
	$(VENV)/bin/python bench/compare.py $(BENCH_ARGS)

bench-engine: $(STAMP)
	$(VENV)/bin/python bench/engine.py

# Console pages at 1,000 topics, 10,000 queues and 200 groups (p50/p95 per page).
bench-console: $(STAMP)
	$(VENV)/bin/python bench/console.py

# Spark's scan of the log beside the engine's own single-process scan of the same data.
bench-spark: $(STAMP)
	$(VENV)/bin/python bench/spark_scan.py

# The design contest scaled: 1,000,000 queues, 20,000,000 messages (MILLION_ARGS to change).
bench-million: $(STAMP)
	$(VENV)/bin/python bench/million.py $(MILLION_ARGS)

bench-streams: $(STAMP)
	$(VENV)/bin/python bench/streams.py $(STREAMS_ARGS)

bench-tail: $(STAMP)
	$(VENV)/bin/python bench/tail.py

bench-filter: $(STAMP)
	$(VENV)/bin/python bench/filter.py

clean:
	rm -rf .pytest_cache .ruff_cache build dist *.egg-info var/static native/target
	rm -f storeadapter/engine/_native*.so
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) var
