# One command runs the server (make run), one passes every test (make test).
# Both install what they need from Debian and PyPI first.
SHELL := /bin/bash
HOST ?= 127.0.0.1
PORT ?= 8080
SWIFT ?= swift
VENV := .venv
PY := $(VENV)/bin/python
OUT ?= test-output

# Debian packages the build and the tests need (a new machine lacks some of them).
APT_BUILD := libwebsockets-dev libssl-dev libcurl4-openssl-dev libsqlite3-dev libpq-dev pkg-config
APT_TEST := chromium chromium-driver curl fonts-noto-cjk nginx openssl python3-venv sqlite3 systemd binutils prometheus postgresql postgresql-15-auto-failover pg-auto-failover-cli gcc nghttp2-server

.PHONY: run build release test unit integration deps deps-test venv clean bench bench-cluster stamp tsan fuzz fuzz-build fuzz-short asan

deps:
	@bash .ci/apt-ensure.sh $(APT_BUILD)

deps-test: deps
	@bash .ci/apt-ensure.sh $(APT_TEST)

# The commit `ridepush --version` reports, rewritten only when it changes (so no rebuild);
# without this file (a plain `swift build`) the binary says "unknown".
STAMP := Sources/RidePushServer/BuildStamp.swift
stamp:
	@c=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	  [ "$$c" = unknown ] || git diff --quiet HEAD -- Sources Package.swift 2>/dev/null || c="$$c-dirty"; \
	  printf '// Written by make (git-ignored): the commit this binary was built from.\nextension BuildInfo {\n    public static let commit = "%s"\n}\n' "$$c" > $(STAMP).tmp; \
	  if cmp -s $(STAMP).tmp $(STAMP); then rm $(STAMP).tmp; else mv $(STAMP).tmp $(STAMP); fi

build: deps stamp
	$(SWIFT) build

release: deps stamp
	$(SWIFT) build -c release

run: release
	.build/release/ridepush serve --host $(HOST) --port $(PORT) --public ./public --create-store

# Test tools from PyPI, every file checked against the hashes in tests/requirements.txt.
# Behind a TLS-inspecting proxy, give pip the proxy's CA in pip's own configuration
# (`pip config set global.cert /path/ca.pem`, or PIP_CERT); TLS verification stays on.
$(VENV)/.ok: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r tests/requirements.txt
	touch $@

venv: deps-test $(VENV)/.ok

# The Swift unit tests: no sleeps, no servers or child processes (docs/testing.md).
unit: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip RideIntegrationTests

# The Swift tests against real stores, servers and processes (Tests/RideIntegrationTests), then
# pytest against the binary. RIDEPUSH_CHECK_SCHEMA: every message a test client receives is
# checked against docs/asyncapi.yaml.
integration: build venv
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter RideIntegrationTests
	mkdir -p $(OUT)
	RIDEPUSH_CHECK_SCHEMA=1 RIDEPUSH_BIN=$(CURDIR)/.build/debug/ridepush RIDEPUSH_OUT=$(CURDIR)/$(OUT) \
		$(PY) -m pytest -q tests

test: unit integration fuzz-short

# libFuzzer over the parsers (Sources/RideFuzz, seeds in Fuzz/corpus/<target>): each target
# for FUZZ_SECONDS, any input slower than FUZZ_TIMEOUT seconds is a finding too. New
# interesting inputs go to .build/fuzz/corpus (not the repo); crashes, timeouts and leaks to
# $(OUT)/fuzz/<target>-*. SwiftPM's --sanitize fuzzer instruments only the fuzz target
# itself, so coverage for the modules under test is asked for explicitly.
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 2
FUZZ_TARGETS := json codec plans token quote zones gpx ops jwks webhooksig http
FUZZ_BUILD := .build/fuzz

fuzz-build: deps
	$(SWIFT) build --build-path $(FUZZ_BUILD) --product RideFuzz --sanitize fuzzer --sanitize address \
		-Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table -Xswiftc -DFUZZING

fuzz: fuzz-build
	@mkdir -p $(OUT)/fuzz
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
		if RIDEFUZZ_TARGET=$$t $(FUZZ_BUILD)/debug/RideFuzz $(FUZZ_BUILD)/corpus/$$t Fuzz/corpus/$$t \
			-max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=2048 -max_len=8192 \
			-artifact_prefix=$(CURDIR)/$(OUT)/fuzz/$$t- -print_final_stats=1 > $(OUT)/fuzz/$$t.log 2>&1; then \
			echo "fuzz $$t: $$(grep -E '^#[0-9]+.*DONE' $(OUT)/fuzz/$$t.log | tail -1)"; \
		else \
			tail -40 $(OUT)/fuzz/$$t.log; echo "fuzz $$t: FOUND A BUG (log $(OUT)/fuzz/$$t.log)"; exit 1; \
		fi; \
	done

# The Swift tests and the integration suite on an AddressSanitizer build. (Swift on Linux has
# no -sanitize=undefined; Swift's own checks trap on overflow and out-of-bounds instead.)
# Server processes write their reports to $(OUT)/asan/; any report fails the target.
ASAN_BUILD := .build/asan
# The deploy build-stage check lists the shipped binary's libraries; an ASan binary's differ.
ASAN_PYTEST ?= --deselect tests/test_deploy.py::test_build_stage_script_stages_and_checks_libraries
asan: deps venv
	$(SWIFT) build --build-path $(ASAN_BUILD) --build-tests --sanitize address
	rm -rf $(OUT)/asan && mkdir -p $(OUT)/asan
	ASAN_OPTIONS=log_path=$(CURDIR)/$(OUT)/asan/unit LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan.supp \
		$(SWIFT) test --build-path $(ASAN_BUILD) --skip-build --sanitize address
	ASAN_OPTIONS=log_path=$(CURDIR)/$(OUT)/asan/server LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan.supp \
		RIDEPUSH_BIN=$(CURDIR)/$(ASAN_BUILD)/debug/ridepush RIDEPUSH_OUT=$(CURDIR)/$(OUT) $(PY) -m pytest -q tests $(ASAN_PYTEST)
	@if grep -l "ERROR: " $(OUT)/asan/* 2>/dev/null; then grep -h -A30 "ERROR: " $(OUT)/asan/* | head -80; \
		echo "asan: reports in $(OUT)/asan/"; exit 1; fi
	@echo "asan: no reports"

# The short pass make test runs.
fuzz-short:
	$(MAKE) fuzz FUZZ_SECONDS=10

# Not a test: prints figures (see BENCHMARKS.md). Needs gcc for the reference server.
bench: release
	bash scripts/bench-compare.sh -n $${N:-19000} -d $${D:-15} -k $${K:-1}

# Not a test either: the several-nodes figures of issue 12 (BENCHMARKS.md), against a
# PostgreSQL it starts itself. ONLY=fanout,roundtrip,crossnode,transitions picks parts.
bench-cluster: release deps-test venv
	RIDEPUSH_BIN=$(CURDIR)/.build/release/ridepush $(PY) tests/measure_cluster.py $${ONLY:+--only $$ONLY}

# ThreadSanitizer: the Swift tests and the integration protocol, scale, overload and core tests
# against a -sanitize=thread build (its own build directory). TSan reports go to
# $(OUT)/tsan/ (log_path: unit.<pid> from the Swift tests, report.<pid> from servers); the
# target fails if any report names RidePush code, and if a Swift test fails (a report there
# also makes the test process exit 66). Integration failures under TSan's 5-15x slowdown
# (timing bounds) do not fail it; races do.
TSAN_BUILD := .build-tsan
TSAN_OPTS := halt_on_error=0 second_deadlock_stack=1
tsan: deps venv
	$(SWIFT) build --build-path $(TSAN_BUILD) -Xswiftc -sanitize=thread
	rm -rf $(OUT)/tsan && mkdir -p $(OUT)/tsan
	TSAN_OPTIONS="log_path=$(CURDIR)/$(OUT)/tsan/unit $(TSAN_OPTS)" $(SWIFT) test --build-path $(TSAN_BUILD) \
	  -Xswiftc -sanitize=thread || { bash scripts/tsan-summary.sh $(OUT)/tsan; exit 1; }
	TSAN_OPTIONS="log_path=$(CURDIR)/$(OUT)/tsan/report $(TSAN_OPTS)" \
	  RIDEPUSH_BIN=$(CURDIR)/$(TSAN_BUILD)/debug/ridepush RIDEPUSH_OUT=$(CURDIR)/$(OUT) \
	  $(PY) -m pytest -q tests/test_protocol.py tests/test_scale.py tests/test_overload.py tests/test_core.py || true
	@bash scripts/tsan-summary.sh $(OUT)/tsan

clean:
	rm -rf .build $(VENV) $(OUT)
