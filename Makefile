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
APT_TEST := chromium chromium-driver fonts-noto-cjk nginx openssl python3-venv sqlite3 systemd binutils gcc

.PHONY: run build release test unit integration deps deps-test venv clean bench

deps:
	@bash .ci/apt-ensure.sh $(APT_BUILD)

deps-test: deps
	@bash .ci/apt-ensure.sh $(APT_TEST)

build: deps
	$(SWIFT) build

release: deps
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

clean:
	rm -rf .build $(VENV) $(OUT)
