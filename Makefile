# perflab: `make demo` runs the quick experiment, `make test` runs the whole test suite.
# Both install what is missing first (Debian 12, as root), idempotently.

PYTHON ?= python3
APT_PACKAGES = mariadb-server mariadb-client sysbench libjemalloc2 libtcmalloc-minimal4 \
	libmimalloc2.0 linux-perf elfutils libdw1 binutils sysstat util-linux procps \
	chromium
# flame graph SVGs (perflab flame): inferno, the Rust port of FlameGraph, built by cargo
# (about 70 s on 2 vCPUs, once); pinned so every machine draws the same graphs
INFERNO_VERSION = 0.12.8
CARGO ?= $(shell command -v cargo || echo $$HOME/.cargo/bin/cargo)
DEMO_STAMP := $(shell date +%Y%m%d-%H%M%S)
DEMO_DIR ?= results/quick-$(DEMO_STAMP)

.PHONY: setup apt python inferno demo test unit integration bench

setup: apt python inferno

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "apt packages: all present"; fi

# Reinstall unless the installed perflab is this checkout's (a second clone must not test the first).
python:
	@here=$$(pwd); cd / && $(PYTHON) -c 'import sys, os, perflab, click, pydantic, rich, scipy, pytest, hypothesis, jinja2, playwright; \
		sys.exit(os.path.dirname(perflab.__file__) != os.path.join(sys.argv[1], "perflab"))' "$$here" 2>/dev/null \
		&& echo "python package: installed from this checkout" \
		|| (cd "$$here" && $(PYTHON) -m pip install -q --root-user-action=ignore -e '.[test]')

inferno:
	@if command -v inferno-flamegraph >/dev/null || [ -x $$HOME/.cargo/bin/inferno-flamegraph ]; then \
		echo "inferno: present"; \
	elif [ -x "$(CARGO)" ]; then \
		echo "installing inferno $(INFERNO_VERSION) with cargo"; \
		"$(CARGO)" install --locked --quiet inferno --version $(INFERNO_VERSION); \
	else echo "inferno: cargo not found; install Rust (https://rustup.rs) for flame graph SVGs"; exit 1; fi

demo: setup
	@# exit 1 (some cells failed) still has a report worth reading; 2, 3 and 130 do not
	$(PYTHON) -m perflab run examples/quick.toml -o $(DEMO_DIR); status=$$?; [ $$status -le 1 ] || exit $$status; \
	$(PYTHON) -m perflab report $(DEMO_DIR) --html -o $(DEMO_DIR)/report.html >/dev/null || exit $$?; \
	echo "HTML report: $(abspath $(DEMO_DIR))/report.html"; exit $$status

test: setup
	$(PYTHON) -m pytest

unit: python
	$(PYTHON) -m pytest tests/unit

integration: setup
	$(PYTHON) -m pytest tests/integration
