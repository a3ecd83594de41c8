# parka's one task runner. `make help` lists the targets; CI calls `make test` via .ci/run.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PARKA_KAFKA_PORT ?= 9092
BENCH_OUT ?= bench-out/quick
# `make bench` writes to bench-out/full unless BENCH_OUT is given on the command line or in the environment
BENCH_FULL_OUT = $(if $(filter file,$(origin BENCH_OUT)),bench-out/full,$(BENCH_OUT))
BENCH_ARGS = --bootstrap localhost:$(PARKA_KAFKA_PORT) --kafka-data-dir "$$(scripts/kafka-local.sh data-dir)"
# BENCH_S3=s3://BUCKET/PREFIX: `make bench` and `make bench-quick` also run the ingest section's
# object-store arms there, against scripts/s3proxy.sh's server (started with that bucket)
BENCH_S3 ?=
BENCH_S3_ENV = $(if $(BENCH_S3),PARKA_STORAGE_OPTIONS="$$(scripts/s3proxy.sh env | paste -sd,)")
BENCH_S3_ARGS = $(if $(BENCH_S3),--s3 $(BENCH_S3))
BENCH_S3_UP = $(if $(BENCH_S3),PARKA_S3PROXY_BUCKET=$(firstword $(subst /, ,$(patsubst s3://%,%,$(BENCH_S3)))) scripts/s3proxy.sh up,true)

.DEFAULT_GOAL := help
SEED ?= 1
RELIABILITY_OUT ?= reliability-out

.PHONY: compiled fetch fetch-early test-jars spark-class-archive help setup kafka-up kafka-down kafka-status spark-cluster-up spark-cluster-down lint docs docs-build test test-unit test-integration demo bench bench-quick bench-encodings bench-dropin bench-encryption bench-freshness bench-freshness-quick bench-list-calls bench-profile bench-soak bench-soak-quick bench-upsert bench-upsert-quick reliability reliability-quick clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 20

# uv (from PyPI, into the virtualenv) installs parka and its dependencies: it downloads in
# parallel, where pip fetched one package after another on a fresh machine. pyspark comes only as
# an sdist, whose wheel uv builds first: stored rather than deflated (--compression=stored), since
# 400 MB of it are jars, compressed already (deflating them again cost some 20 CPU-s of the 33 the
# build took). The virtualenv gets pip from uv too, with the rest (the missing-extra messages name
# it): made without pip, it gets uv from the system's pip (`pip --python`, pip 22.3 and up), and
# only without one does ensurepip install pip first. A virtualenv with uv took 3.7-4.1 CPU-s
# that way, 8.0-10.1 with ensurepip (benchmarks/results/2026-12-01-venv-without-ensurepip/).
UV := uv==0.13.9
UV_INSTALL = $(BIN)/uv pip install --quiet -C--build-option=--compression=stored --python $(BIN)/python
# Every Python process make starts writes the bytecode of the modules it imports, once: with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) each of the suite's ~250 processes
# compiled parka's and pyarrow's modules again, and compiling every installed module up front
# (uv's --compile-bytecode) cost ~45 CPU-s for the few that anything imports.
unexport PYTHONDONTWRITEBYTECODE
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install --quiet $(UV) 2>/dev/null \
	  || { $(BIN)/python -m ensurepip --default-pip >/dev/null && $(BIN)/pip install --quiet $(UV); }
	$(UV_INSTALL) pip -e '.[dev,spark]'
	touch $@

setup: $(BIN)/.installed ## create .venv and install parka with its dev tools

kafka-up: ## start the local Kafka broker (KRaft, Maven Central jars, Java 17) on localhost:$PARKA_KAFKA_PORT
	scripts/kafka-local.sh up

kafka-down: ## stop the local Kafka broker
	scripts/kafka-local.sh down

kafka-status: ## exit 0 when the local broker answers
	scripts/kafka-local.sh status

spark-cluster-up: setup ## a Spark standalone cluster on loopback (1 master, 2 workers; pyspark's own daemon script)
	scripts/spark-standalone.sh up

spark-cluster-down: ## stop that cluster
	scripts/spark-standalone.sh down

lint: setup ## ruff, mypy and the import contracts (import-linter)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	scripts/typecheck.sh $(BIN)/mypy
	scripts/lint-imports.sh $(BIN)/lint-imports

# mkdocs-material prints a banner about its successor on every run; the build's own warnings stay
DOCS_ENV := NO_MKDOCS_2_WARNING=1

docs: setup ## serve the docs site on http://127.0.0.1:8000, rebuilt on every edit (mkdocs serve)
	$(DOCS_ENV) $(BIN)/python -m mkdocs serve

docs-build: setup ## build the docs site into site/ with --strict: a broken link, anchor or docstring reference fails (make test runs it)
	$(DOCS_ENV) $(BIN)/python -m mkdocs build --strict

test-unit: setup ## unit tests only (no network)
	$(BIN)/pytest tests/unit -q

test-integration: setup ## integration tests against a real broker
	$(BIN)/pytest tests/integration -q

# Worker processes: most integration tests wait on a broker or a subprocess, so five share 2 cores;
# the Spark session's tests go to one of them (one JVM: tests/conftest.py), which runs ahead of
# the others (tests/integration/spark/conftest.py). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 5

# The repo's own modules byte-compiled beside the Spark jars' fetch, rather than by the test
# workers at once as each collects the tests and imports them; then the tests collected once,
# which writes the bytecode of what collection imports (the installed packages too: uv installs
# without compiling them) and pytest's rewritten test modules, for the five workers to read. Five
# workers collecting at once on a fresh machine each compiled all of it: 79-90 CPU-s against 49-54
# with one collection first (benchmarks/results/2026-12-02-collect-once/). A collection error is
# the real run's to report.
COMPILED := parka producer consumer lake ops spark_ext reliability tests benchmarks demo

# On a fresh machine the downloads come first: the servers the tests start first (fetch-early)
# beside the virtualenv's. The slow first fetches of the servers whose tests come last
# (FETCHED_LATE) run in the background from the first second instead, each into a log; a
# server's start in the tests waits for its fetch under the script's lock. The Spark session's
# jars (test-jars: their listed files fetched at once, then Ivy's resolution from them, 12-15 s on
# a fresh machine) are fetched in the background from the tests' start, beside the workers' start
# and the first tests; every Spark test waits for that fetch under its lock
# (tests/integration/spark/_jars.py).
# lint and the docs site's strict build (29 s on a fresh machine, before the tests) run beside the
# tests, niced, on the CPU they leave idle (PARKA_CHECKS_BESIDE, tests/_checks.py); the test that
# reports them (tests/test_checks.py) comes last.
test: ## the whole suite: lint, the docs site, unit and integration tests (starts its own broker and servers)
	@$(call fetch_in_background,$(FETCHED_LATE))
	$(MAKE) --no-print-directory -j2 setup fetch-early
	@nohup $(BIN)/python -m tests.integration.spark._jars >"$(FETCH_LOGS)/fetch-spark-jars.log" 2>&1 </dev/null &
	$(MAKE) --no-print-directory compiled
	PARKA_CHECKS_BESIDE=1 $(BIN)/pytest -q -ra -n $(PYTEST_WORKERS)

# The registry's first fetch is a Quarkus build from Maven Central (64 s on a fresh machine, 36
# CPU-s; 199 s while Maven fetched POMs one after another), Azurite's an npm install (~40 s): in
# make test's foreground they were the set-up's longest wait, while their tests start minutes in.
FETCHED_EARLY := kafka-local s3proxy iceberg-rest
FETCHED_LATE := schema-registry azurite
FETCH_LOGS = $${XDG_CACHE_HOME:-$$HOME/.cache}/parka
# $(call fetch_in_background,SCRIPTS): each script's fetch, detached and niced (mostly downloads,
# one after another, its CPU taken from what the virtualenv's install and the tests leave), its
# output in FETCH_LOGS
fetch_in_background = mkdir -p "$(FETCH_LOGS)" && for s in $(1); do \
	  nohup nice -n 10 scripts/$$s.sh fetch >"$(FETCH_LOGS)/fetch-$$s.log" 2>&1 </dev/null & done
# $(call fetch_all,SCRIPTS): each script's fetch at once; fails when any does
fetch_all = pids=(); for s in $(1); do scripts/$$s.sh fetch & pids+=($$!); done; \
	  rc=0; for p in "$${pids[@]}"; do wait "$$p" || rc=1; done; exit $$rc

fetch: ## download (once) what the test servers run: Kafka, s3proxy, Iceberg's REST catalog, Apicurio, Azurite
	@$(call fetch_all,$(FETCHED_EARLY) $(FETCHED_LATE))

fetch-early:
	@$(call fetch_all,$(FETCHED_EARLY))

test-jars: setup ## fetch (once) the jars of the tests' Spark session into Ivy's cache
	$(BIN)/python -m tests.integration.spark._jars

spark-class-archive: setup ## write (once) a class-data-sharing archive of the tests' Spark session, which the tests' Spark JVMs then start from (~54 CPU-s once; make test does not write it)
	$(BIN)/python -m tests.integration.spark._jars --write-archive

compiled: setup
	$(BIN)/python -m compileall -q -j 0 $(COMPILED)
	-@$(BIN)/pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1

# PARKA_BOOTSTRAP=HOST:PORT: the demo uses that broker (one already running) and starts none; it
# then cannot read the broker's disk, so it prints no on-disk sizes. Without it the demo starts a
# broker of its own: on PARKA_KAFKA_PORT when given, else on 9092 or, when another process (a
# Kafka of the user's) holds 9092, on a free port (scripts/kafka-local.sh free-port says which)
DEMO_PORT = $(if $(filter file,$(origin PARKA_KAFKA_PORT)),$$(scripts/kafka-local.sh free-port),$(PARKA_KAFKA_PORT))

demo: setup ## the main job: flights as Parquet segments through a local broker (PARKA_BOOTSTRAP=HOST:PORT: an existing one), with numbers
	$(if $(PARKA_BOOTSTRAP),$(BIN)/python demo/flights_demo.py --bootstrap $(PARKA_BOOTSTRAP),\
	  port=$(DEMO_PORT) && export PARKA_KAFKA_PORT=$$port && scripts/kafka-local.sh up && \
	  $(BIN)/python demo/flights_demo.py --bootstrap localhost:$$port --kafka-data-dir "$$(scripts/kafka-local.sh data-dir)")

$(BIN)/.bench-installed: $(BIN)/.installed pyproject.toml
	$(UV_INSTALL) -e '.[dev,spark,bench]'
	touch $@

bench: setup kafka-up $(BIN)/.bench-installed ## the full benchmark suite (~25 min on 2 cores, plus ~20 for the 10M-row lake section, ~4 for freshness, ~10 for upserts and ~2 for row topics) into bench-out/full (or BENCH_OUT)
	$(BENCH_S3_UP)
	scripts/schema-registry.sh up
	$(BENCH_S3_ENV) $(BIN)/python -m benchmarks.suite --mode full --out $(BENCH_FULL_OUT) --registry-url "$$(scripts/schema-registry.sh url)" $(BENCH_ARGS) $(BENCH_S3_ARGS)

bench-quick: setup kafka-up $(BIN)/.bench-installed ## a reduced benchmark suite (a few minutes) into BENCH_OUT (default bench-out/quick)
	$(BENCH_S3_UP)
	scripts/schema-registry.sh up
	$(BENCH_S3_ENV) $(BIN)/python -m benchmarks.suite --mode quick --out $(BENCH_OUT) --registry-url "$$(scripts/schema-registry.sh url)" $(BENCH_ARGS) $(BENCH_S3_ARGS)

bench-encodings: setup kafka-up $(BIN)/.bench-installed ## bytes per row at 10,000 rows/batch, zstd: JSON, Avro, Parquet tuned and pyarrow defaults (a few min) into BENCH_OUT
	$(BIN)/python -m benchmarks.suite --mode encodings --out $(BENCH_OUT) $(BENCH_ARGS)

bench-dropin: setup kafka-up $(BIN)/.bench-installed ## the drop-in's per-record CPU: produce() per dict, consume()/poll() vs Avro + zstd, 10,000 rows/batch, and the producers plus parka ingest per million rows (~10 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.suite --mode dropin --out $(BENCH_OUT) $(BENCH_ARGS)

bench-encryption: setup kafka-up $(BIN)/.bench-installed ## column encryption's cost: encode+encrypt vs encode, decode+decrypt vs decode (~2 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.suite --mode encryption --out $(BENCH_OUT) $(BENCH_ARGS)

bench-freshness: setup kafka-up $(BIN)/.bench-installed ## produce-to-visible latency at 10k and 100k rows/s into 4 partitions (parka ingest -l 1), the table's files per hour, DuckDB scans vs the row baseline (~10 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.freshness --out $(BENCH_OUT) $(BENCH_ARGS)

bench-freshness-quick: setup kafka-up $(BIN)/.bench-installed ## the freshness benchmark at one rate (10k rows/s) for 15 s (~1 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.freshness --quick --out $(BENCH_OUT) $(BENCH_ARGS)

bench-profile: setup kafka-up $(BIN)/.bench-installed ## the per-record path's CPU split by stage under cProfile: produce() per dict and consume(), per data set (~3 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.profile_path --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

bench-list-calls: setup kafka-up ## LIST requests of parka ingest on s3proxy per commit as its table ages, through a counting proxy (~4 min) into BENCH_OUT
	scripts/s3proxy.sh up
	$(BIN)/python -m benchmarks.list_calls --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

bench-soak: setup kafka-up $(BIN)/.bench-installed ## weeks of parka ingest's history in ~40 min: 2,000 rows/s, -l 0.1, 12-s retentions (one simulated hour each); commit CPU, p99, table opens, files, log and RSS per simulated hour into BENCH_OUT
	$(BIN)/python -m benchmarks.soak --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

bench-soak-quick: setup kafka-up $(BIN)/.bench-installed ## the soak benchmark for 60 s, no Spark (~2 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.soak --quick --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

bench-upsert: setup kafka-up $(BIN)/.bench-installed ## parka ingest --upsert against delta-rs MERGE, pyiceberg upsert and Spark MERGE: CPU per event into 1M keys, 5% deletes as tombstones (~10 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.upsert --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

bench-upsert-quick: setup kafka-up $(BIN)/.bench-installed ## the upsert benchmark at 20,000 keys (~1 min) into BENCH_OUT
	$(BIN)/python -m benchmarks.upsert --quick --bootstrap localhost:$(PARKA_KAFKA_PORT) --out $(BENCH_OUT) $(BENCH_ARGS)

reliability: setup kafka-up ## the full fault suite (~13 min on 2 cores, and ~3 for its long-history scenario): kills, restarts, bad inputs, VACUUM amid kills; summary in reliability-out/full
	PARKA_FUZZ_EXAMPLES=1000 $(BIN)/pytest tests/unit/test_segment_fuzz.py -q -p no:cacheprovider
	rm -rf $(RELIABILITY_OUT)/full
	$(BIN)/python -m reliability --mode full --bootstrap 127.0.0.1:$(PARKA_KAFKA_PORT) --seed $(SEED) \
	  --out $(RELIABILITY_OUT)/full

reliability-quick: setup ## the quick fault suite (~2 min; make test runs it): broker from PARKA_BOOTSTRAP, else as the tests get one
	$(BIN)/pytest tests/integration/test_reliability.py -q

clean: ## remove build and cache folders (not .venv, not the broker's data)
	rm -rf build dist site *.egg-info .mypy_cache .ruff_cache .pytest_cache bench-out demo-out reliability-out
