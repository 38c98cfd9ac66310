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
APT_BUILD := libwebsockets-dev libssl-dev libsqlite3-dev pkg-config
APT_TEST := chromium chromium-driver fonts-noto-cjk nginx openssl python3-venv sqlite3 systemd binutils

.PHONY: run build release test unit integration deps deps-test venv clean bench tsan

deps:
	@bash .ci/apt-ensure.sh $(APT_BUILD)

deps-test: deps
	@bash .ci/apt-ensure.sh $(APT_TEST)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	.build/release/ridepush serve --host $(HOST) --port $(PORT) --public ./public

# Test tools from PyPI, every file checked against the hashes in tests/requirements.txt.
# Behind a TLS-inspecting proxy whose CA pip does not know, the retry skips TLS verification
# for PyPI's two hosts only: the hashes still guarantee the exact files.
$(VENV)/.ok: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r tests/requirements.txt || \
	  $(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes \
	    --trusted-host pypi.org --trusted-host files.pythonhosted.org -r tests/requirements.txt
	touch $@

venv: deps-test $(VENV)/.ok

unit: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

integration: build venv
	mkdir -p $(OUT)
	RIDEPUSH_BIN=$(CURDIR)/.build/debug/ridepush RIDEPUSH_OUT=$(CURDIR)/$(OUT) \
		$(PY) -m pytest -q tests

test: unit integration

# Not a test: prints figures (see BENCHMARKS.md). Needs gcc for the reference server.
bench: release
	bash scripts/bench-compare.sh -n $${N:-19000} -d $${D:-15} -k $${K:-1}

# ThreadSanitizer: the Swift tests and the integration protocol, scale and overload tests
# against a -sanitize=thread build (its own build directory). TSan reports go to
# $(OUT)/tsan/ (log_path); the target fails if any report names RidePush code.
TSAN_BUILD := .build-tsan
tsan: deps venv
	$(SWIFT) build --build-path $(TSAN_BUILD) -Xswiftc -sanitize=thread
	$(SWIFT) test --build-path $(TSAN_BUILD) -Xswiftc -sanitize=thread
	rm -rf $(OUT)/tsan && mkdir -p $(OUT)/tsan
	TSAN_OPTIONS="log_path=$(CURDIR)/$(OUT)/tsan/report halt_on_error=0 second_deadlock_stack=1" \
	  RIDEPUSH_BIN=$(CURDIR)/$(TSAN_BUILD)/debug/ridepush RIDEPUSH_OUT=$(CURDIR)/$(OUT) \
	  $(PY) -m pytest -q tests/test_protocol.py tests/test_scale.py tests/test_overload.py
	@bash scripts/tsan-summary.sh $(OUT)/tsan

clean:
	rm -rf .build $(VENV) $(OUT)
